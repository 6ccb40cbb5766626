package compaction_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/compaction"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

// The summarizer's model calls are billed to the run.
func TestSummarizerBillsTheRun(t *testing.T) {
	summary := strings.Join(compaction.Sections, "\nsomething\n")
	u := loop.Usage{InputTokens: 120, OutputTokens: 30, TotalTokens: 150}
	p := scripted.New([]scripted.Step{{Text: summary, Usage: &u}}, scripted.Sequential())
	var billed loop.Usage
	s := &compaction.LLMSummarizer{}
	out, err := s.Summarize(context.Background(), &compaction.SummaryRequest{
		Provider: p, Entries: []loop.Entry{loop.UserText("hello"), loop.AssistantText("hi")},
		AddUsage: func(x loop.Usage) { billed.Add(x) },
	})
	require.NoError(t, err)
	require.Contains(t, out, "## Session intent")
	require.EqualValues(t, 120, billed.InputTokens)
	require.EqualValues(t, 30, billed.OutputTokens)
}
