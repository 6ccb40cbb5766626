package faults

import "testing"

// TestSingleServerRestart: a single (non-clustered) server is killed with
// SIGKILL and restarted on its store while two workers have 100 runs in
// flight. Every run completes, with one terminal event, its status
// agreeing, and no tool call run again beyond the calls in flight.
func TestSingleServerRestart(t *testing.T) {
	srv := startServers(t, 1)
	f := startFleet(t, srv, 2, 1, 1000)
	underLoad(t, f, "single", 100, restartSingle())
}
