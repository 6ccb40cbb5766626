package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// TestCheckpointWaitsForItsEvents (issue 16): events go out pipelined —
// tool_call_started and tool_call_completed are not awaited one by one —
// but the checkpoint that records the tool's result is written only once
// every event before it is stored. Here another writer has stored the
// run's tool_call_completed seq first (as a second execution of the run
// would): the worker finds it at the checkpoint's flush and stops fenced,
// and the checkpoint never holds the result whose event is not the run's.
func TestCheckpointWaitsForItsEvents(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents, Worker: func(c *worker.Config) { c.Metrics = reg }})
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "gated", Input: bus.TextInput("go")})
	require.NoError(t, err)
	asked := waitEvent(t, f, rep.RunID, loop.EventApprovalRequired, 10*time.Second)

	// approval_resolved, tool_call_started, tool_call_completed follow:
	// another writer stores the last one's seq first.
	pub, err := bus.NewPublisher(f.JS, bus.PublisherConfig{})
	require.NoError(t, err)
	other, err := pub.Resume(rep.RunID, bus.JSON, asked.Seq+2)
	require.NoError(t, err)
	_, err = other.Publish(ctx, &loop.ToolCallCompleted{Call: loop.ToolCall{ID: "c1", Name: "echo"}, Result: "not this run's"})
	require.NoError(t, err)
	require.NoError(t, other.Close(ctx))

	_, err = f.Client.Approve(ctx, rep.RunID, "c1", loop.Approve, "")
	require.NoError(t, err)
	fenced := func() float64 { return counter(t, reg, "lovia_runs_fenced_total") }
	require.True(t, waitFor(10*time.Second, func() bool { return fenced() == 1 }),
		"the worker did not stop the run fenced within 10s (fenced %v)", fenced())

	snap, err := f.Store.Checkpointer().Load(ctx, rep.RunID)
	require.NoError(t, err)
	for _, e := range snap.Entries {
		require.NotEqual(t, loop.KindToolResult, e.Kind, "the checkpoint holds the tool's result although its tool_call_completed was not stored: %+v", snap.Entries)
	}
	envs := runEvents(t, f, rep.RunID)
	require.Empty(t, fleettest.OfType(envs, loop.EventTurnEnded), "the fenced run published on: %v", fleettest.Types(envs))
}
