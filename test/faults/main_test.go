// Package faults injects the broker's own faults into a running fleet:
// real nats-server processes (a 3-node cluster, or a single server) built
// from the module's nats-server, real `lovia worker` processes, loopback
// only. A node is killed with SIGKILL (the leader of a stream, found
// through the server's own stream info) and restarted, or paused with
// SIGSTOP past the election timeout and resumed; every run must still
// complete with exactly one terminal event, its status agreeing with its
// events, and no tool call run again.
//
// The short variant runs with the other tests; the full one (every fault
// in turn, more runs) is `make chaos` (build tag chaos).
package faults

import (
	"testing"

	"github.com/lovia-fleet/lovia/internal/fleettest"
)

// Binaries built for these tests.
var (
	natsServerBin string
	loviaBin      string
)

func TestMain(m *testing.M) {
	fleettest.MainWithBinaries(m,
		fleettest.Binary{Pkg: "github.com/nats-io/nats-server/v2", Path: &natsServerBin},
		fleettest.Binary{Pkg: "../../cmd/cli", Path: &loviaBin})
}
