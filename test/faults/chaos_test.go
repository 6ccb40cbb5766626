//go:build chaos

package faults

import "testing"

// TestChaosCluster is the full variant (`make chaos`): on one 3-node
// cluster with two workers, each fault in turn under 300 runs in flight —
// kill -9 the leader of the checkpoints bucket, of the mailbox bucket and
// of the runs stream (each restarted), then SIGSTOP the checkpoints
// bucket's leader past the election timeout and SIGCONT it.
func TestChaosCluster(t *testing.T) {
	srv := startServers(t, 3)
	f := startFleet(t, srv, 2, 3, 2000)
	for i, fl := range []fault{
		killLeader("KV_lovia_checkpoints"),
		killLeader("KV_lovia_mailbox"),
		killLeader("LOVIA_RUNS"),
		pauseLeader("KV_lovia_checkpoints"),
	} {
		t.Run(fl.name, func(t *testing.T) {
			f.t = t
			underLoad(t, f, "c"+string(rune('a'+i)), 300, fl)
		})
	}
}

// TestChaosSingleServer is the single-server variant of `make chaos`: a
// non-clustered server killed with SIGKILL and restarted three times,
// each under 300 runs in flight.
func TestChaosSingleServer(t *testing.T) {
	srv := startServers(t, 1)
	f := startFleet(t, srv, 2, 1, 2000)
	for i := range 3 {
		fl := restartSingle()
		t.Run(fl.name+" #"+string(rune('1'+i)), func(t *testing.T) {
			f.t = t
			underLoad(t, f, "s"+string(rune('a'+i)), 300, fl)
		})
	}
}
