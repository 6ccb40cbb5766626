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

// TestApproveOnlyWhatTheRunAsks: a decision for a call the run has not
// asked about is an error naming the call and saying where the asked calls
// are announced — not "accepted: true" for a decision nothing will read;
// the call it does ask about is accepted and decides it.
func TestApproveOnlyWhatTheRunAsks(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents})
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "gated", Input: bus.TextInput("go")})
	require.NoError(t, err)
	waitEvent(t, f, rep.RunID, loop.EventApprovalRequired, 10*time.Second)

	_, err = f.Client.Approve(ctx, rep.RunID, "c999", loop.Approve, "")
	ae := apiError(t, err, bus.TypeInvalidRequest)
	require.Contains(t, ae.Message, "not waiting for a decision on call c999")
	require.Contains(t, ae.Hint, "approval_required")

	ok, err := f.Client.Approve(ctx, rep.RunID, "c1", loop.Approve, "")
	require.NoError(t, err)
	require.True(t, ok.Accepted)
	envs := f.Events(rep.RunID, 10*time.Second)
	require.Equal(t, "done", fleettest.Event[*loop.RunCompleted](t, envs[len(envs)-1]).Output)
}
