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

// TestQueuedRunPastDedupWindowRunsOnce (issue 16): a first submission's
// record names no request sequence (its claim records it), so past half
// the runs stream's deduplication window the client's retry of a queued
// run cannot ask the stream about its request and publishes it again
// under a new message id. A run whose request the stream lost runs from
// the new copy; a run whose request was still there has two copies, and
// still runs exactly once (the first copy is stale: the record names the
// second) — one run_started, one terminal event.
func TestQueuedRunPastDedupWindowRunsOnce(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents, Workers: -1})
	ctx := context.Background()
	runs, err := f.JS.Stream(ctx, "LOVIA_RUNS")
	require.NoError(t, err)
	info, err := runs.Info(ctx)
	require.NoError(t, err)
	// A short window (the API reads it at its first requeue).
	const window = time.Second
	cfg := info.Config
	cfg.Duplicates = window
	_, err = f.JS.UpdateStream(ctx, cfg)
	require.NoError(t, err)

	lost := &bus.RunRequest{RunID: "lost-past-window", Agent: "calc", Input: bus.TextInput("x")}
	kept := &bus.RunRequest{RunID: "kept-past-window", Agent: "calc", Input: bus.TextInput("x")}
	_, err = f.Client.Submit(ctx, lost)
	require.NoError(t, err)
	info, err = runs.Info(ctx)
	require.NoError(t, err)
	require.NoError(t, runs.DeleteMsg(ctx, info.State.LastSeq))
	_, err = f.Client.Submit(ctx, kept)
	require.NoError(t, err)
	for _, id := range []string{lost.RunID, kept.RunID} {
		e, err := f.Store.Runs().Get(ctx, id)
		require.NoError(t, err)
		require.Zero(t, e.Record.RequestSeq)
		require.True(t, waitFor(10*window, func() bool { return time.Since(e.Record.UpdatedAt) >= window }),
			"waiting for run %s's record to be a whole deduplication window old", id)
	}

	for _, req := range []*bus.RunRequest{lost, kept} {
		for range 2 { // the second retry finds the new copy stored
			rep, err := f.Client.Submit(ctx, req)
			require.NoError(t, err)
			require.Equal(t, bus.StateQueued, rep.Status)
		}
		e, err := f.Store.Runs().Get(ctx, req.RunID)
		require.NoError(t, err)
		require.Equal(t, 1, e.Record.Requeues, "run %s", req.RunID)
		require.NotZero(t, e.Record.RequestSeq, "run %s: the requeue did not record its copy", req.RunID)
	}

	f.StartWorker(workerConfig(t, f, "w1"))
	for _, id := range []string{lost.RunID, kept.RunID} {
		waitEvent(t, f, id, loop.EventRunCompleted, 15*time.Second)
	}
	waitIdle(t, f, 15*time.Second)
	for _, id := range []string{lost.RunID, kept.RunID} {
		envs := runEvents(t, f, id)
		checkOneSubmission(t, id, envs)
		require.Len(t, fleettest.OfType(envs, loop.EventRunStarted), 1, "run %s: %v", id, fleettest.Types(envs))
	}
	info, err = runs.Info(ctx)
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs, "a copy of a request was left in the runs stream")
}
