package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/internal/leaktest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

const agents = `
agents:
  - name: calc
    model: scripted
    tools: [echo]
    script:
      - call: {name: echo, args: {text: "84"}, id: c1}
      - text: The answer is 84.
        finish: stop
`

func TestSubmitRunsToCompletion(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: agents})
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "calc", Input: bus.TextInput("What is 12*7?")})
	require.NoError(t, err)
	require.Equal(t, bus.StateQueued, rep.Status)
	require.Equal(t, "lovia.events."+rep.RunID, rep.EventsSubject)

	envs := f.Events(rep.RunID, 10*time.Second)
	require.Equal(t, []string{"run_started", "turn_started", "message_completed", "tool_call_started", "tool_call_completed", "turn_ended",
		"turn_started", "text_delta", "text_delta", "text_delta", "text_delta", "message_completed", "turn_ended", "run_completed"}, fleettest.Types(envs))
	for i, e := range envs {
		require.EqualValues(t, i+1, e.Seq)
		require.Equal(t, "calc", e.Agent)
	}
	ev, err := envs[len(envs)-1].Event()
	require.NoError(t, err)
	require.Equal(t, "The answer is 84.", ev.(*loop.RunCompleted).Output)

	require.Eventually(t, func() bool {
		st, err := f.Client.Status(ctx, rep.RunID)
		return err == nil && st.Status == bus.StateCompleted
	}, 5*time.Second, 20*time.Millisecond)
	st, err := f.Client.Status(ctx, rep.RunID)
	require.NoError(t, err)
	require.Equal(t, "The answer is 84.", st.Result.Output)
	require.NotNil(t, st.Result.FinishReason)
	require.Equal(t, "stop", *st.Result.FinishReason)
	require.Equal(t, 1, st.Attempt)
	require.Equal(t, "w1", st.Worker)

	// Submitting the completed run again publishes nothing and replays.
	again, err := f.Client.Submit(ctx, &bus.RunRequest{RunID: rep.RunID, Agent: "calc", Input: bus.TextInput("different")})
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, "The answer is 84.", again.Result.Output)
	time.Sleep(200 * time.Millisecond)
	require.Len(t, f.Events(rep.RunID, 5*time.Second), len(envs))
}
