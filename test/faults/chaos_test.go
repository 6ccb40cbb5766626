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
