package worker_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
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

// holdWrites counts the bytes written to the workers' holdings: KV writes
// of hold.> keys and purges of the runs bucket's stream (a run key is
// removed by a purge), as the server receives them.
type holdWrites struct {
	mu    sync.Mutex
	bytes int
}

func watchHoldWrites(t *testing.T, f *fleettest.Fleet) *holdWrites {
	t.Helper()
	hw := &holdWrites{}
	bucket := bus.Names{}.RunsBucket()
	count := func(m *nats.Msg) {
		n := len(m.Subject) + len(m.Data)
		for k, v := range m.Header {
			n += len(k)
			for _, s := range v {
				n += len(s)
			}
		}
		hw.mu.Lock()
		defer hw.mu.Unlock()
		hw.bytes += n
	}
	for _, subj := range []string{"$KV." + bucket + ".hold.>", "$JS.API.STREAM.PURGE.KV_" + bucket} {
		sub, err := f.Conn.Subscribe(subj, count)
		require.NoError(t, err)
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	require.NoError(t, f.Conn.Flush())
	return hw
}

func (hw *holdWrites) total() int {
	hw.mu.Lock()
	defer hw.mu.Unlock()
	return hw.bytes
}

// settled waits until no holdings write came for a while.
func (hw *holdWrites) settled(t *testing.T) {
	t.Helper()
	last, since := hw.total(), time.Now()
	require.Eventually(t, func() bool {
		if n := hw.total(); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) > time.Second
	}, 60*time.Second, 20*time.Millisecond, "waiting for the holdings writes to stop")
}

// TestClaimWritesHoldingsOfConstantSize: the holdings bytes a claim and
// its release write (the run's key, put and purged) do not grow with the
// number of runs the worker holds: a run that claims and ends beside 200
// held runs writes what it writes on an idle worker, not a record listing
// the 200.
func TestClaimWritesHoldingsOfConstantSize(t *testing.T) {
	t.Parallel()
	const held = 200
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents})
	ctx := context.Background()
	hw := watchHoldWrites(t, f)

	// One run that claims, holds 1.5s and ends: the holdings bytes written
	// from its submission until no worker lists it.
	claimAndRelease := func() int {
		before := hw.total()
		rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "napper", Input: bus.TextInput("nap")})
		require.NoError(t, err)
		waitEvent(t, f, rep.RunID, loop.EventRunCompleted, 90*time.Second)
		require.Eventually(t, func() bool {
			owned, err := f.Store.Control().Owned(ctx, rep.RunID)
			return err == nil && !owned
		}, 20*time.Second, 20*time.Millisecond, "waiting for the ended run to leave the worker's holdings")
		return hw.total() - before
	}
	alone := claimAndRelease()

	for range held {
		_, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "sleeper", Input: bus.TextInput("sleep")})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		info, err := agentConsumerInfo(ctx, f, "sleeper")
		return err == nil && info.NumAckPending == held && info.NumPending == 0
	}, 60*time.Second, 20*time.Millisecond, "waiting for the worker to hold %d runs", held)
	hw.settled(t)
	beside := claimAndRelease()
	t.Logf("holdings bytes of a claim and its release: %d alone, %d beside %d held runs", alone, beside, held)
	require.Positive(t, alone, "the claim wrote its holdings")
	require.LessOrEqual(t, beside, alone*3/2, "a claim beside %d held runs wrote %d bytes, alone %d", held, beside, alone)
}

// TestTakeoverOfMoreRunsThanOneRecordFits: a worker holds more runs than
// one message of the server's max payload could list (8 KiB here, about
// a hundred runs; 1 MiB, about 12,700, by default) and crashes; a
// survivor still releases every one of them within seconds, long before
// the ack wait, and each resumes there once.
func TestTakeoverOfMoreRunsThanOneRecordFits(t *testing.T) {
	t.Parallel()
	const (
		runs    = 250
		ackWait = 2 * time.Minute
	)
	conns := map[string]interface{ Close() }{}
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents, MaxPayload: 8 << 10, Worker: func(c *worker.Config) {
		c.AckWait, c.Heartbeat = ackWait, 5*time.Second
		c.SkipProvision = false // sets the consumer's AckWait
		conns[c.ID] = c.Conn
	}})
	a := f.Workers[0]
	ctx := context.Background()
	ids := make([]string, runs)
	for i := range ids {
		rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "sleeper", Input: bus.TextInput("sleep")})
		require.NoError(t, err)
		ids[i] = rep.RunID
	}
	// Every run is held, and listed in the worker's holdings.
	require.Eventually(t, func() bool {
		h, err := f.Store.Control().ReadHoldings(ctx, f.Workers[0].ID())
		return err == nil && len(h.Runs) == runs
	}, 60*time.Second, 50*time.Millisecond, "waiting for the worker to list %d held runs", runs)

	// Crash the worker: cut its connection, then end its goroutines (they
	// can no longer reach NATS).
	for _, c := range conns {
		c.Close()
	}
	crashed := time.Now()
	stopCtx, cancel := context.WithCancel(ctx)
	cancel()
	require.NoError(t, a.Stop(stopCtx))

	f.StartWorker(withConfig(workerConfig(t, f, "wB"), func(c *worker.Config) {
		c.AckWait, c.Heartbeat = ackWait, 5*time.Second
		c.TakeoverInterval = 100 * time.Millisecond
		c.TakeoverGrace = 500 * time.Millisecond
	}))
	left := slices.Clone(ids)
	require.Eventually(t, func() bool {
		for len(left) > 0 {
			st, err := f.Client.Status(ctx, left[0])
			if err != nil || st.Worker != "wB" || st.Status != bus.StateRunning {
				return false
			}
			left = left[1:]
		}
		return true
	}, 60*time.Second, 100*time.Millisecond, "waiting for the survivor to resume every crashed run")
	took := time.Since(crashed)
	t.Logf("%d runs resumed on the survivor %s after the crash (ack wait %s)", runs, took.Round(time.Millisecond), ackWait)
	require.Less(t, took, ackWait/2, "the takeover waited for the ack wait")
	for _, id := range ids[:10] {
		require.Len(t, fleettest.OfType(runEvents(t, f, id), bus.EventRunResumed), 1, "run %s resumed once", id)
	}
}
