package worker_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/store"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// TestDeadWorkersHoldingsReleaseOnlyRunningRuns: a worker's holdings
// record drops ended runs lazily, so a dead worker's record may list runs
// it no longer held. The survivor that takes the record releases (NAKs)
// only the listed runs whose run record still says the dead worker's claim
// runs them (and, a released run's request being gone, ends it from its
// terminal event); an ended run's stale entry is left alone, and the
// record is taken (removed) once.
func TestDeadWorkersHoldingsReleaseOnlyRunningRuns(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents, Worker: func(c *worker.Config) {
		c.TakeoverInterval = 50 * time.Millisecond
		c.TakeoverGrace = 200 * time.Millisecond
	}})
	ctx := context.Background()
	ended, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "calc", Input: bus.TextInput("What is 12*7?")})
	require.NoError(t, err)
	held, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "calc", Input: bus.TextInput("What is 12*7?")})
	require.NoError(t, err)
	waitIdle(t, f, 30*time.Second)
	// The second run's record as a claim by the dead worker leaves it.
	_, err = f.Store.Runs().Modify(ctx, held.RunID, func(r *store.RunRecord) error {
		r.Status, r.Worker, r.Attempt = store.RunRunning, "w9", 7
		return nil
	})
	require.NoError(t, err)

	naks := map[string]chan string{"ended": make(chan string, 4), "held": make(chan string, 4)}
	for name, ch := range naks {
		sub, err := f.Conn.Subscribe("test.ack."+name, func(m *nats.Msg) { ch <- string(m.Data) })
		require.NoError(t, err)
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	require.NoError(t, f.Conn.Flush())
	// w9 never answers its pings nor is announced in the fleet: gone.
	_, err = f.Store.Control().SetHoldings(ctx, "w9", []store.Holding{
		{RunID: ended.RunID, Ack: "test.ack.ended", Seq: 1, Attempt: 1},
		{RunID: held.RunID, Ack: "test.ack.held", Seq: 2, Attempt: 7},
	})
	require.NoError(t, err)

	select {
	case got := <-naks["held"]:
		require.Equal(t, "-NAK", got)
	case <-time.After(20 * time.Second):
		t.Fatal("waited 20s for the survivor to release the dead worker's running run")
	}
	// The release is recorded in the run index. Its request being gone
	// (it was acknowledged when the run ended), the survivor's lost-run
	// check then ends the record from the run's terminal event, perhaps
	// before this reads it: the history tells the release, not the status.
	e, err := f.Store.Runs().Get(ctx, held.RunID)
	require.NoError(t, err)
	require.True(t, slices.ContainsFunc(e.Record.Attempts, func(a store.Attempt) bool {
		return a.Kind == store.StepRelease && a.Worker == "w9" && a.Attempt == 7
	}), "the release is recorded in the run index: %+v", e.Record)
	require.Eventually(t, func() bool {
		e, err := f.Store.Runs().Get(ctx, held.RunID)
		return err == nil && e.Record.Status == store.RunCompleted
	}, 20*time.Second, 20*time.Millisecond, "waiting for the released run, whose request is gone, to end from its terminal event")
	require.Eventually(t, func() bool {
		owned, err := f.Store.Control().Owned(ctx, ended.RunID)
		return err == nil && !owned
	}, 20*time.Second, 20*time.Millisecond, "waiting for the dead worker's holdings record to be taken")
	select {
	case got := <-naks["ended"]:
		t.Fatalf("the ended run's stale entry was released: %q", got)
	case got := <-naks["held"]:
		t.Fatalf("the running run was released twice: %q", got)
	default:
	}
	st, err := f.Client.Status(ctx, ended.RunID)
	require.NoError(t, err)
	require.Equal(t, bus.StateCompleted, st.Status)
}
