package worker_test

import (
	"context"
	"fmt"
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

// TestCrashedOwnerApprovalAppliesOnTakeover proves requirement 4: worker A
// claims a run that waits for an approval and dies without a word (its
// NATS connection is cut, so it can neither ack, nak, heartbeat nor
// publish: the closest thing to SIGKILL in one process); the approval is
// made through the API while no worker owns the run (it is persisted);
// worker B, started afterwards, gets the run, publishes run_resumed with
// attempt 2, re-asks the dangling call, applies the stored approval, runs
// the tool and completes: one terminal event, contiguous seqs. Both crash
// detectors are covered: the ack wait alone (B's takeover watcher off) and
// the fast takeover (B finds A's presence subject without responders and
// releases A's delivery before the ack wait).
func TestCrashedOwnerApprovalAppliesOnTakeover(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		takeover time.Duration
		ackWait  time.Duration
	}{
		{"ack wait", time.Hour, 2 * time.Second},
		{"fast takeover", 100 * time.Millisecond, 20 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			crashedOwnerApproval(t, tc.ackWait, tc.takeover)
		})
	}
}

func crashedOwnerApproval(t *testing.T, ackWait, takeover time.Duration) {
	var connA = new(struct{ c interface{ Close() } })
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents, Worker: func(c *worker.Config) {
		c.AckWait, c.Heartbeat = ackWait, 500*time.Millisecond
		c.SkipProvision = false // sets the consumer's AckWait
		connA.c = c.Conn
	}})
	a := f.Workers[0]
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "gated", Input: bus.TextInput("deploy")})
	require.NoError(t, err)
	waitEvent(t, f, rep.RunID, loop.EventApprovalRequired, 10*time.Second)

	// Crash A: cut its connection, then end its goroutines (they can no
	// longer reach NATS, so nothing they do is seen).
	connA.c.Close()
	crashed := time.Now()
	stopCtx, cancel := context.WithCancel(ctx)
	cancel()
	require.NoError(t, a.Stop(stopCtx))
	stopTook := time.Since(crashed)

	ar, err := f.Client.Approve(ctx, rep.RunID, "c1", loop.Approve, "approved while ownerless")
	require.NoError(t, err)
	require.True(t, ar.Accepted)

	startB := time.Now()
	f.StartWorker(withConfig(workerConfig(t, f, "wB"), func(c *worker.Config) {
		c.AckWait = ackWait
		c.Heartbeat = 500 * time.Millisecond
		c.TakeoverInterval = takeover
		c.TakeoverGrace = 500 * time.Millisecond
	}))
	resumed := waitEvent(t, f, rep.RunID, bus.EventRunResumed, 15*time.Second)
	t.Logf("crash to run_resumed on B: %s; B start to run_resumed: %s; A's Stop took %s (AckWait %s, takeover interval %s)",
		time.Since(crashed), time.Since(startB), stopTook, ackWait, takeover)
	if ackWait > 10*time.Second {
		require.Less(t, time.Since(startB), 5*time.Second, "the takeover waited for the ack wait")
	}
	rr := fleettest.Event[*bus.RunResumed](t, resumed)
	require.Equal(t, "wB", rr.Worker)
	require.Equal(t, 2, rr.Attempt)

	f.Events(rep.RunID, 15*time.Second)
	waitIdle(t, f, 10*time.Second)
	envs := runEvents(t, f, rep.RunID)
	t.Logf("events: %v", fleettest.Types(envs))
	checkOneSubmission(t, rep.RunID, envs)
	require.Len(t, fleettest.OfType(envs, loop.EventRunStarted), 1)
	require.Len(t, fleettest.OfType(envs, bus.EventRunResumed), 1)
	res := fleettest.OfType(envs, loop.EventApprovalResolved)
	require.Len(t, res, 1, "types %v", fleettest.Types(envs))
	require.Equal(t, loop.Approve, fleettest.Event[*loop.ApprovalResolved](t, res[0]).Decision)
	require.Greater(t, res[0].Seq, resumed.Seq, "the decision was applied by B")
	require.Len(t, fleettest.OfType(envs, loop.EventToolCallStarted), 1)
	require.Equal(t, "done", fleettest.Event[*loop.RunCompleted](t, envs[len(envs)-1]).Output)

	st, err := f.Client.Status(ctx, rep.RunID)
	require.NoError(t, err)
	require.Equal(t, bus.StateCompleted, st.Status)
	require.Equal(t, "wB", st.Worker)
	require.Equal(t, 2, st.Attempt)
}

// TestOrderedShutdownReleasesRun proves requirement 6: Stop on a worker
// whose run sleeps in a long tool waits ShutdownGrace (200ms), interrupts
// the run at a checkpoint and releases it with a Nak — no terminal event —
// so a second worker takes it over at once (no AckWait to wait out):
// run_resumed, the dangling sleep call runs again, one terminal event.
func TestOrderedShutdownReleasesRun(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents, Worker: func(c *worker.Config) {
		c.ShutdownGrace = 200 * time.Millisecond
	}})
	a := f.Workers[0]
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "napper", Input: bus.TextInput("nap")})
	require.NoError(t, err)
	waitEvent(t, f, rep.RunID, loop.EventToolCallStarted, 10*time.Second)

	t0 := time.Now()
	require.NoError(t, a.Stop(ctx))
	stopTook := time.Since(t0)
	t.Logf("Stop took %s (grace 200ms)", stopTook)
	require.Less(t, stopTook, 1200*time.Millisecond, "Stop waited for the 1.5s sleep")
	require.Empty(t, fleettest.OfType(runEvents(t, f, rep.RunID), loop.EventRunFailed), "an interrupted run publishes no terminal event")

	t1 := time.Now()
	f.StartWorker(workerConfig(t, f, "wB"))
	resumed := waitEvent(t, f, rep.RunID, bus.EventRunResumed, 10*time.Second)
	t.Logf("B started to run_resumed: %s", time.Since(t1))
	require.Less(t, time.Since(t1), 5*time.Second, "the release was not immediate")
	rr := fleettest.Event[*bus.RunResumed](t, resumed)
	require.Equal(t, "wB", rr.Worker)
	require.Equal(t, 2, rr.Attempt)

	f.Events(rep.RunID, 15*time.Second)
	waitIdle(t, f, 10*time.Second)
	envs := runEvents(t, f, rep.RunID)
	t.Logf("events: %v", fleettest.Types(envs))
	checkOneSubmission(t, rep.RunID, envs)
	starts := fleettest.OfType(envs, loop.EventToolCallStarted)
	require.Len(t, starts, 2, "the dangling sleep ran again: %v", fleettest.Types(envs))
	require.Greater(t, starts[1].Seq, resumed.Seq)
	require.Len(t, fleettest.OfType(envs, loop.EventToolCallCompleted), 1)
	require.Equal(t, "rested", fleettest.Event[*loop.RunCompleted](t, envs[len(envs)-1]).Output)
	st, err := f.Client.Status(ctx, rep.RunID)
	require.NoError(t, err)
	require.Equal(t, "wB", st.Worker)
	require.Equal(t, 2, st.Attempt)
}

// TestHeartbeatFollowsConsumerAckWait: a worker with the default config
// (no AckWait), started after the fleet's consumer was given AckWait 2s,
// must keep its claims on that consumer — whether it binds to the streams
// (SkipProvision) or provisions them itself, in which case it must also
// leave the fleet's ack wait alone (a worker without --ack-wait used to
// reset it to 30s for everyone). Otherwise a run longer than the ack wait
// is redelivered while it runs and executes twice at once. The run (a 2.5s
// sleep) must have one run_started, no run_resumed, one terminal event,
// and never be redelivered.
func TestHeartbeatFollowsConsumerAckWait(t *testing.T) {
	t.Parallel()
	for _, provision := range []bool{false, true} {
		t.Run(fmt.Sprintf("provision=%t", provision), func(t *testing.T) {
			t.Parallel()
			f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents, Worker: func(c *worker.Config) {
				c.AckWait, c.Heartbeat, c.SkipProvision = 2*time.Second, 500*time.Millisecond, false
			}})
			ctx := context.Background()
			require.NoError(t, f.Workers[0].Stop(ctx))
			cfg := workerConfig(t, f, "wdefault")
			cfg.SkipProvision = !provision
			f.StartWorker(cfg)

			ci, err := f.JS.Consumer(ctx, "LOVIA_RUNS", "agent-dozer")
			require.NoError(t, err)
			info, err := ci.Info(ctx)
			require.NoError(t, err)
			require.Equal(t, 2*time.Second, info.Config.AckWait, "a worker without AckWait changed the fleet's")

			rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "dozer", Input: bus.TextInput("nap")})
			require.NoError(t, err)
			f.Events(rep.RunID, 15*time.Second)
			waitIdle(t, f, 10*time.Second)
			envs := runEvents(t, f, rep.RunID)
			checkOneSubmission(t, rep.RunID, envs)
			require.Empty(t, fleettest.OfType(envs, bus.EventRunResumed), "redelivered while running: %v", fleettest.Types(envs))
			info, err = ci.Info(ctx)
			require.NoError(t, err)
			require.Equal(t, info.Delivered.Stream, info.Delivered.Consumer, "the run was redelivered")
		})
	}
}

// TestTakeoverNakDoesNotDoubleRun: worker A dies holding a run, and its
// claim expires before any other worker is up, so the request waits for
// redelivery. Worker B then starts with a very eager takeover reaper: B's
// claim loop receives the redelivered request while B's reaper finds A
// gone and sends -NAK on A's (older) delivery — which the server applies
// to the live delivery by stream sequence, redelivering the request to B a
// second time while B runs it. B must not start a second execution: one
// run_resumed, one terminal event, contiguous seqs. (Without the guard in
// execute this failed about one run in three.)
func TestTakeoverNakDoesNotDoubleRun(t *testing.T) {
	t.Parallel()
	var connA = new(struct{ c interface{ Close() } })
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents, Worker: func(c *worker.Config) {
		c.AckWait, c.Heartbeat, c.SkipProvision = time.Second, 300*time.Millisecond, false
		connA.c = c.Conn
	}})
	a := f.Workers[0]
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "napper", Input: bus.TextInput("x")})
	require.NoError(t, err)
	waitEvent(t, f, rep.RunID, loop.EventToolCallStarted, 10*time.Second)
	connA.c.Close()
	crashed := time.Now()
	stopCtx, cancel := context.WithCancel(ctx)
	cancel()
	require.NoError(t, a.Stop(stopCtx))
	// Let A's claim expire (AckWait 1s after its last heartbeat): there is
	// no event to wait for, the request just becomes deliverable again.
	time.Sleep(time.Until(crashed.Add(1500 * time.Millisecond)))
	f.StartWorker(withConfig(workerConfig(t, f, "wB"), func(c *worker.Config) {
		c.AckWait = time.Second
		c.Heartbeat = 300 * time.Millisecond
		c.TakeoverInterval = time.Millisecond
	}))
	f.Events(rep.RunID, 15*time.Second)
	waitIdle(t, f, 10*time.Second)
	envs := runEvents(t, f, rep.RunID)
	checkOneSubmission(t, rep.RunID, envs)
	require.Len(t, fleettest.OfType(envs, bus.EventRunResumed), 1, "a second execution started: %v", fleettest.Types(envs))
	require.Len(t, fleettest.OfType(envs, loop.EventToolCallCompleted), 1)
}

// TestReconnectingWorkerKeepsItsRuns: after a NATS restart, worker B is
// back at once while worker A takes seconds to reconnect. For those seconds
// A's presence subject has no responders, as if A had died; B must not
// release A's run (it would then run on two workers at once): A reconnects
// within TakeoverGrace and finishes it, and nothing is resumed.
func TestReconnectingWorkerKeepsItsRuns(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents})
	ctx := context.Background()
	require.NoError(t, f.Workers[0].Stop(ctx))

	slowConn, err := nats.Connect(f.Server.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(2*time.Second), nats.ReconnectJitter(0, 0))
	require.NoError(t, err)
	t.Cleanup(slowConn.Close)
	a := workerConfig(t, f, "slow")
	a.Conn = slowConn
	f.StartWorker(a)
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "dozer", Input: bus.TextInput("nap")})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := f.Client.Status(ctx, rep.RunID)
		return err == nil && st.Status == bus.StateRunning && st.Worker == "slow"
	}, 10*time.Second, 20*time.Millisecond)

	b := workerConfig(t, f, "fast")
	b.TakeoverInterval = 100 * time.Millisecond
	f.StartWorker(b)
	time.Sleep(300 * time.Millisecond) // B has seen A's ownership record
	f.RestartServer(200 * time.Millisecond)

	envs := f.Events(rep.RunID, 30*time.Second)
	checkOneSubmission(t, rep.RunID, envs)
	require.Empty(t, fleettest.OfType(envs, bus.EventRunResumed), "A's run was taken while A reconnected: %v", fleettest.Types(envs))
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)
}

// TestStaleOwnerDoesNotReleaseTheNewClaim: the server applies a NAK by
// stream sequence, so a worker whose run has since been claimed by another
// (the index names the other's claim) must not NAK its old delivery when
// it is interrupted: that would release the new owner's live one.
func TestStaleOwnerDoesNotReleaseTheNewClaim(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents})
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "sleeper", Input: bus.TextInput("nap")})
	require.NoError(t, err)
	waitEvent(t, f, rep.RunID, loop.EventToolCallStarted, 10*time.Second)

	// Another worker's claim, as the index records it.
	_, err = f.Store.Runs().Modify(ctx, rep.RunID, func(r *store.RunRecord) error {
		r.Worker, r.Attempt = "newer", r.Attempt+1
		return nil
	})
	require.NoError(t, err)
	stopNow, cancel := context.WithCancel(ctx)
	cancel()
	require.NoError(t, f.Workers[0].Stop(stopNow))

	// A released delivery would reach this worker at once; a delivery left
	// alone waits for its ack wait (30s).
	f.StartWorker(workerConfig(t, f, "w2"))
	time.Sleep(3 * time.Second)
	envs := runEvents(t, f, rep.RunID)
	require.Empty(t, fleettest.OfType(envs, bus.EventRunResumed), "the stale owner released the delivery: %v", fleettest.Types(envs))
}
