package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// TestCrashAfterFinalTurnBeforeItsCheckpoint (issue 16): a final message
// is checkpointed with the run's completion, in one write, so its turn's
// events — turn_ended included — can be stored while the checkpoint does
// not hold the turn. Worker A dies right after publishing turn_ended of
// the run's only turn, before any checkpoint write; worker B resumes the
// run and must discard what that turn told (output_discarded) before the
// turn runs again: a reader never sees two final messages as one run's
// output. Exactly one terminal event ends the run.
func TestCrashAfterFinalTurnBeforeItsCheckpoint(t *testing.T) {
	t.Parallel()
	f, proxy, a := proxiedFleet(t, fleetAgents, func(url string) *faultProxy {
		return startFaultProxy(t, url, "Lovia-Event: "+string(loop.EventTurnEnded), false)
	})
	ctx := context.Background()

	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "quick", Input: bus.TextInput("x")})
	require.NoError(t, err)
	select {
	case <-proxy.fired:
	case <-time.After(10 * time.Second):
		t.Fatal("worker A never published turn_ended within 10s")
	}
	require.NoError(t, a.Stop(ctx))
	before := runEvents(t, f, rep.RunID)
	require.Equal(t, loop.EventTurnEnded, before[len(before)-1].Type, "A's last stored event: %v", fleettest.Types(before))
	_, err = f.Store.Checkpointer().Load(ctx, rep.RunID)
	require.ErrorIs(t, err, loop.ErrNoSnapshot, "A wrote no checkpoint: its only write is the completion")

	f.StartWorker(withConfig(workerConfig(t, f, "wB"), func(c *worker.Config) { c.AckWait = time.Second; c.Heartbeat = 300 * time.Millisecond }))
	envs := f.Events(rep.RunID, 20*time.Second)
	checkOneSubmission(t, rep.RunID, envs)
	after := envs[len(before):]
	require.Equal(t, []string{string(bus.EventRunResumed), string(loop.EventOutputDiscarded), string(loop.EventTurnStarted)}, fleettest.Types(after)[:3],
		"B discards the told turn before running it again: %v", fleettest.Types(envs))
	require.Equal(t, "ok", fleettest.Event[*loop.RunCompleted](t, envs[len(envs)-1]).Output)
	st, err := f.Client.Status(ctx, rep.RunID)
	require.NoError(t, err)
	require.Equal(t, bus.StateCompleted, st.Status)
}
