package faults

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A fault is injected into a running fleet and recovered from; it returns
// when the cluster is whole again.
type fault struct {
	name   string
	inject func(t *testing.T, f *fleet)
}

// killLeader kills with SIGKILL the node that leads stream (as the
// server's stream info reports it), waits for the survivors to elect
// another leader, and restarts the node.
func killLeader(stream string) fault {
	return fault{name: "kill -9 the leader of " + stream, inject: func(t *testing.T, f *fleet) {
		victim := f.streamLeader(stream)
		f.srv.kill9(victim)
		f.awaitNewLeader(stream, victim)
		f.srv.start(victim)
		f.srv.waitHealthy(victim, 120*time.Second)
	}}
}

// pauseLeader stops the node that leads stream with SIGSTOP until the
// others have elected another leader (past the election timeout), then
// resumes it with SIGCONT.
func pauseLeader(stream string) fault {
	return fault{name: "SIGSTOP the leader of " + stream + " past the election timeout", inject: func(t *testing.T, f *fleet) {
		victim := f.streamLeader(stream)
		f.srv.signal(victim, syscall.SIGSTOP)
		f.awaitNewLeader(stream, victim)
		f.srv.signal(victim, syscall.SIGCONT)
		f.srv.waitHealthy(victim, 120*time.Second)
	}}
}

// restartSingle kills the only server with SIGKILL and starts it again on
// the same store.
func restartSingle() fault {
	return fault{name: "kill -9 and restart the single server", inject: func(t *testing.T, f *fleet) {
		f.srv.kill9(0)
		f.srv.start(0)
		f.srv.waitHealthy(0, 120*time.Second)
	}}
}

// streamLeader waits for stream to have a leader and returns its node.
func (f *fleet) streamLeader(stream string) int {
	f.t.Helper()
	leader := -1
	require.True(f.t, waitUntil(30*time.Second, func() bool { leader = f.srv.leader(f.js, stream); return leader >= 0 }),
		"waited 30s for %s to report a leader", stream)
	return leader
}

// awaitNewLeader waits for stream to report a leader other than old.
func (f *fleet) awaitNewLeader(stream string, old int) {
	f.t.Helper()
	require.True(f.t, waitUntil(60*time.Second, func() bool {
		l := f.srv.leader(f.js, stream)
		return l >= 0 && l != old
	}), "waited 60s for %s to elect a leader other than %s", stream, f.srv.nodes[old].name)
}

// underLoad submits runs runs (ids <prefix>-<i>), waits until some are in
// flight, injects the fault, and verifies every run.
func underLoad(t *testing.T, f *fleet, prefix string, runs int, fl fault) outcome {
	t.Helper()
	after := f.lastEventSeq()
	before := f.eventCount()
	ids := f.submit(prefix, runs)
	// About a tenth of the runs' events are stored: runs are in flight.
	f.waitEvents(before+uint64(runs), 120*time.Second)
	inflight := inFlight(f.events(after))
	require.Positive(t, inflight, "runs are in flight at the fault")
	at := time.Now()
	fl.inject(t, f)
	recovered := time.Since(at)
	o := f.verify(ids, after, inflight, 300*time.Second)
	t.Logf("FAULT %s: %d runs, %d in flight at the fault, cluster whole again after %s, every run ended %s later; "+
		"calls run again: %d, runs resumed elsewhere: %d", fl.name, o.runs, o.inFlight, recovered.Round(100*time.Millisecond),
		o.took.Round(100*time.Millisecond), o.reruns, o.resumed)
	return o
}

// TestClusterLosesTheCheckpointsLeader is the short variant: on a 3-node
// cluster (R3 streams and buckets, sync_interval always) with two workers
// and 100 runs in flight, the node that leads the checkpoints bucket is
// killed with SIGKILL and restarted. Every run completes, with one
// terminal event, its status agreeing, and no tool call run again beyond
// the calls in flight.
func TestClusterLosesTheCheckpointsLeader(t *testing.T) {
	srv := startServers(t, 3)
	f := startFleet(t, srv, 2, 3, 1000)
	underLoad(t, f, "ckpt", 100, killLeader("KV_lovia_checkpoints"))
}
