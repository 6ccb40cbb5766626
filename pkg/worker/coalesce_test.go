package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// With CoalesceDeltas, a model streaming word by word costs a few
// text_delta events, whose concatenation is the exact text, all before the
// message_completed.
func TestCoalescedDeltas(t *testing.T) {
	t.Parallel()
	words := strings.TrimSpace(strings.Repeat("word ", 60))
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: `
agents:
  - name: talker
    model: scripted
    script:
      - text: "` + words + `"
        reasoning: "thinking it over first"
        delay_ms: 2
`, Worker: func(c *worker.Config) { c.CoalesceDeltas = 40 * time.Millisecond }})
	rep, err := f.Client.Submit(context.Background(), &bus.RunRequest{Agent: "talker", Input: bus.TextInput("talk")})
	require.NoError(t, err)
	envs := f.Events(rep.RunID, 15*time.Second)
	var text, reasoning strings.Builder
	deltas, completedAt := 0, -1
	for i, e := range envs {
		ev, err := e.Event()
		require.NoError(t, err)
		switch d := ev.(type) {
		case *loop.TextDelta:
			require.Equal(t, -1, completedAt, "deltas precede message_completed")
			text.WriteString(d.Delta)
			deltas++
		case *loop.ReasoningDelta:
			require.Zero(t, text.Len(), "reasoning comes before text")
			reasoning.WriteString(d.Delta)
		case *loop.MessageCompleted:
			completedAt = i
		}
		require.EqualValues(t, i+1, e.Seq)
	}
	require.Equal(t, words, text.String())
	require.Equal(t, "thinking it over first", reasoning.String())
	require.Less(t, deltas, 60, "60 words were coalesced into fewer events")
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)
}
