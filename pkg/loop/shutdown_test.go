package loop_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

// Cancelling the caller's context (a worker shutting down) while a tool
// runs ends the run without a terminal event and without closing the turn:
// the call stays dangling for the worker that resumes it.
func TestCallerCancelDuringToolLeavesTurnOpen(t *testing.T) {
	for _, batch := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		started := make(chan struct{}, 2)
		wait := strTool("wait", func(c context.Context) (string, error) {
			started <- struct{}{}
			<-c.Done()
			return "", c.Err()
		})
		step := scripted.CallTool("wait", nil, "c1")
		if batch {
			step = scripted.Batch(scripted.Call{ID: "c1", Name: "wait"}, scripted.Call{ID: "c2", Name: "wait"})
		}
		cp := loop.NewMemoryCheckpointer()
		h := newRunner().Stream(ctx, agentWith(scripted.New([]scripted.Step{step, scripted.Text("never")}), wait),
			[]loop.Entry{loop.UserText("go")}, loop.WithCheckpoint(cp, "r1"))
		go func() { <-started; cancel() }()
		evs, _, err := collect(h)
		require.True(t, errors.Is(err, context.Canceled), "%v", err)
		for _, s := range sig(evs) {
			require.NotEqual(t, "TE(1)", s)
			require.NotEqual(t, "RF(Cancelled)", s)
		}
		snap, err := cp.Load(context.Background(), "r1")
		require.NoError(t, err)
		require.Equal(t, loop.StatusInterrupted, snap.Status)
		require.NotEmpty(t, loop.PendingToolCalls(snap.Entries), "the interrupted call stays dangling")
	}
}
