package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// A run the loop refuses before it starts (resume_only for a run that has
// no checkpoint) ends with one clear run_failed and is not redelivered.
func TestRunRefusedBeforeStartFailsOnce(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: agents})
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "calc", Input: bus.TextInput("x"), IfRunExists: bus.IfExistsResumeOnly})
	require.NoError(t, err)
	envs := f.Events(rep.RunID, 10*time.Second)
	require.Len(t, envs, 1)
	require.Equal(t, "calc", envs[0].Agent, "the refused run's run_failed names its agent")
	ev, err := envs[0].Event()
	require.NoError(t, err)
	rf := ev.(*loop.RunFailed)
	require.Equal(t, "UserError", rf.Error.Type)
	require.Contains(t, rf.Error.Message, "No snapshot found")
	require.Eventually(t, func() bool {
		st, err := f.Client.Status(ctx, rep.RunID)
		return err == nil && st.Status == bus.StateFailed
	}, 5*time.Second, 20*time.Millisecond)
	runs, err := f.JS.Stream(ctx, "LOVIA_RUNS")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := runs.Info(ctx)
		return err == nil && info.State.Msgs == 0
	}, 5*time.Second, 20*time.Millisecond, "terminated, not left for redelivery")
}

// A raw publish of a run id alone (no input, no checkpoint to resume)
// is refused before it starts, with one run_failed naming its agent
// (issue 25, item 4).
func TestRawRunWithoutInputIsRefused(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: agents})
	publishRaw(t, f, "calc", []byte(`{"run_id":"no-input"}`), nil)
	envs := f.Events("no-input", 10*time.Second)
	require.Len(t, envs, 1, "%v", fleettest.Types(envs))
	require.Equal(t, "calc", envs[0].Agent)
	rf := fleettest.Event[*loop.RunFailed](t, envs[0])
	require.Equal(t, "UserError", rf.Error.Type)
	require.Contains(t, rf.Error.Message, "no input")
	require.NotEmpty(t, rf.Error.Hint)
}
