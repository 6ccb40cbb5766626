package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// TestSubmitIndexesRunOnce (issue 16): a run's first submission writes its
// record once (before: a create, then a compare-and-set adding the
// request's stream sequence); the claim records the sequence.
func TestSubmitIndexesRunOnce(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents, Workers: -1})
	ctx := context.Background()
	c := countOps(t, f)
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "quick", Input: bus.TextInput("x")})
	require.NoError(t, err)
	c.flush(t)
	require.Equal(t, 1, c.snapshot()["write lovia_runs rec"], "run record writes of one submit: %v", c.snapshot())
	e, err := f.Store.Runs().Get(ctx, rep.RunID)
	require.NoError(t, err)
	require.Equal(t, store.RunQueued, e.Record.Status)
	require.Equal(t, 1, e.Record.Submissions)

	runs, err := f.JS.Stream(ctx, "LOVIA_RUNS")
	require.NoError(t, err)
	info, err := runs.Info(ctx)
	require.NoError(t, err)
	f.StartWorker(workerConfig(t, f, "w1"))
	waitEvent(t, f, rep.RunID, loop.EventRunCompleted, 15*time.Second)
	e, err = f.Store.Runs().Get(ctx, rep.RunID)
	require.NoError(t, err)
	require.Equal(t, info.State.LastSeq, e.Record.RequestSeq, "the claim did not record the request's stream sequence")
}
