package worker_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// TestScaleThreeWorkers proves requirement 2: 300 scripted runs (two turns
// and a tool call each) submitted at once through the API to three
// workers all complete; at least two workers did work (the status reply's
// worker); every run's events have seqs 1..n and exactly one terminal
// event; nothing is left in the RUNS stream.
func TestScaleThreeWorkers(t *testing.T) {
	t.Parallel()
	const runs = 300
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents, Workers: 3})
	ctx := context.Background()

	t0 := time.Now()
	ids := make([]string, runs)
	var wg sync.WaitGroup
	var next atomic.Int64
	var submitErr atomic.Value
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= runs {
					return
				}
				rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "calc", Input: bus.TextInput("What is 12*7?")})
				if err != nil {
					submitErr.Store(err)
					return
				}
				ids[i] = rep.RunID
			}
		})
	}
	wg.Wait()
	if err, _ := submitErr.Load().(error); err != nil {
		t.Fatal(err)
	}
	submitted := time.Since(t0)

	// Every run ends: count terminal events as they are stored.
	waitIdle(t, f, 60*time.Second)
	elapsed := time.Since(t0)
	all := readStored(t, f, "lovia.events.>")
	byRun := map[string][]*bus.Envelope{}
	for _, s := range all {
		byRun[s.Env.RunID] = append(byRun[s.Env.RunID], s.Env)
	}
	require.Len(t, byRun, runs)
	workers := map[string]int{}
	for _, id := range ids {
		envs := byRun[id]
		checkOneSubmission(t, id, envs)
		require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type, "run %s: %v", id, fleettest.Types(envs))
		require.Len(t, envs, 14, "run %s: %v", id, fleettest.Types(envs))
		workers[fleettest.Event[*bus.RunStarted](t, envs[0]).Worker]++
	}
	t.Logf("%d runs (%d events) on 3 workers: submitted in %s, all done in %s (%.0f runs/s); runs per worker %v",
		runs, len(all), submitted.Round(time.Millisecond), elapsed.Round(time.Millisecond), float64(runs)/elapsed.Seconds(), workers)
	require.GreaterOrEqual(t, len(workers), 2, "one worker did all the work: %v", workers)

	// The status replies agree with the events.
	fromStatus := map[string]int{}
	for _, id := range ids {
		st, err := f.Client.Status(ctx, id)
		require.NoError(t, err)
		require.Equal(t, bus.StateCompleted, st.Status, "run %s", id)
		require.Equal(t, 1, st.Attempt)
		fromStatus[st.Worker]++
	}
	require.Equal(t, workers, fromStatus)
}
