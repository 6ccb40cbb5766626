// Package e2e runs the fleet as real processes: `lovia worker` binaries
// against a NATS server, killed with SIGKILL mid-run.
package e2e

import (
	"testing"

	"github.com/lovia-fleet/lovia/internal/fleettest"
)

// loviaBin is the lovia binary built for these tests; goWorkerBin the
// Go-defined worker of examples/go-worker.
var loviaBin, goWorkerBin string

func TestMain(m *testing.M) {
	fleettest.MainWithBinaries(m, fleettest.Binary{Pkg: "../../cmd/cli", Path: &loviaBin},
		fleettest.Binary{Pkg: "../../examples/go-worker", Path: &goWorkerBin})
}
