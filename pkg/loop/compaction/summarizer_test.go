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

const fullSummary = "## Session intent\nfix it\n## Current state\nhalf done\n## Key facts & decisions\nNone.\n" +
	"## Artifacts\n/tmp/x\n## Constraints & preferences\nNone.\n## Next steps\nfinish"

func TestLLMSummarizer(t *testing.T) {
	t.Parallel()
	span := []loop.Entry{user("please fix"), {Kind: loop.KindReasoning, Text: "secret thoughts"}, text("on it"),
		loop.ToolCallEntry("c1", "grep", `{"q":"x"}`), res("c1", compaction.ClearMarker("c1"))}

	t.Run("FirstSummary", func(t *testing.T) {
		t.Parallel()
		p := scripted.New([]scripted.Step{scripted.Text(fullSummary)}, scripted.Sequential())
		out, err := (&compaction.LLMSummarizer{}).Summarize(context.Background(), &compaction.SummaryRequest{Provider: p, Model: "scripted", Entries: span})
		require.NoError(t, err)
		require.Equal(t, fullSummary, out)
		reqs := p.Requests()
		require.Len(t, reqs, 1)
		r := reqs[0]
		require.NotNil(t, r.Settings.Temperature)
		require.Zero(t, *r.Settings.Temperature)
		require.Equal(t, 8192, r.Settings.MaxTokens)
		require.Nil(t, r.Tools)
		require.Len(t, r.Entries, 2)
		require.Equal(t, loop.RoleSystem, r.Entries[0].Role)
		for _, s := range compaction.Sections {
			require.Contains(t, r.Entries[0].Content, s+"\n")
		}
		prompt := r.Entries[1].Content
		require.Equal(t, "Summarize the conversation below.\n\n<conversation>\n"+
			"[user] please fix\n[assistant] on it\n[tool_call:grep] {\"q\":\"x\"}\n[tool_result] "+compaction.ClearMarker("c1")+"\n"+
			"</conversation>", prompt)
		require.NotContains(t, prompt, "secret", "reasoning is omitted")
	})

	t.Run("Fold", func(t *testing.T) {
		t.Parallel()
		prompt := compaction.SummaryPrompt("PRIOR", span[:1])
		require.Equal(t, "Here is the summary so far:\n\n<summary>\nPRIOR\n</summary>\n\n"+
			"Fold the new events below into it and answer with the complete updated summary, not just the changes.\n\n"+
			"<new_events>\n[user] please fix\n</new_events>", prompt)
	})

	t.Run("OneCorrectiveTurn", func(t *testing.T) {
		t.Parallel()
		p := scripted.New([]scripted.Step{scripted.Text("## Session intent\nfix it"), scripted.Text(fullSummary)}, scripted.Sequential())
		out, err := (&compaction.LLMSummarizer{}).Summarize(context.Background(), &compaction.SummaryRequest{Provider: p, Entries: span})
		require.NoError(t, err)
		require.Equal(t, fullSummary, out)
		reqs := p.Requests()
		require.Len(t, reqs, 2)
		second := reqs[1].Entries
		require.Len(t, second, 4)
		require.Equal(t, loop.AssistantText("## Session intent\nfix it"), second[2])
		require.Contains(t, second[3].Content, "missing these sections: ## Current state, ## Key facts & decisions")

		// Still incomplete after the correction: accepted as is.
		p = scripted.New([]scripted.Step{scripted.Text("short"), scripted.Text("still short")}, scripted.Sequential())
		out, err = (&compaction.LLMSummarizer{}).Summarize(context.Background(), &compaction.SummaryRequest{Provider: p, Entries: span})
		require.NoError(t, err)
		require.Equal(t, "still short", out)
		require.Equal(t, 2, p.Calls())
	})

	t.Run("Failures", func(t *testing.T) {
		t.Parallel()
		for name, step := range map[string]scripted.Step{
			"length finish": {Text: fullSummary, Finish: "length"},
			"no text":       {Calls: []scripted.Call{{Name: "f"}}},
		} {
			p := scripted.New([]scripted.Step{step}, scripted.Sequential())
			_, err := (&compaction.LLMSummarizer{}).Summarize(context.Background(), &compaction.SummaryRequest{Provider: p, Entries: span})
			require.ErrorIs(t, err, compaction.ErrSummaryRejected, name)
		}
		p := scripted.New(nil)
		_, err := (&compaction.LLMSummarizer{}).Summarize(context.Background(), &compaction.SummaryRequest{Provider: p, Entries: span})
		require.ErrorIs(t, err, scripted.ErrExhausted)
		_, err = (&compaction.LLMSummarizer{}).Summarize(context.Background(), &compaction.SummaryRequest{Entries: span})
		require.ErrorContains(t, err, "no provider")
	})

	t.Run("OwnProviderAndWindow", func(t *testing.T) {
		t.Parallel()
		own := scripted.New([]scripted.Step{scripted.Text(fullSummary)}, scripted.Sequential())
		run := scripted.New(nil)
		s := &compaction.LLMSummarizer{Provider: own, MaxOutputTokens: 100, Window: 32000}
		out, err := s.Summarize(context.Background(), &compaction.SummaryRequest{Provider: run, Entries: span})
		require.NoError(t, err)
		require.Equal(t, fullSummary, out)
		require.Zero(t, run.Calls())
		require.Equal(t, 100, own.Requests()[0].Settings.MaxTokens)
		require.Equal(t, 32000, s.ContextWindow())
	})

	t.Run("DrivesTheSummarizeStage", func(t *testing.T) {
		t.Parallel()
		// The default summarizer on the run's own provider.
		es := chatty(20)
		p := scripted.New([]scripted.Step{scripted.Text(fullSummary), scripted.Text(fullSummary)}, scripted.Sequential())
		c := only(estimateOf(t, es), 0.9, compaction.Config{}, compaction.Summarize{})
		req := &loop.CompactRequest{Entries: es, Provider: p, Model: "scripted", State: map[string]any{}}
		r := compact(t, c, req)
		require.Equal(t, "summary", r.Reason)
		require.Equal(t, fullSummary, *r.Summary)
		require.True(t, strings.HasSuffix(r.Entries[1].Content, fullSummary+"\n</context_summary>"))
	})
}
