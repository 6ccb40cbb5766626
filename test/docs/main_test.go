package docs_test

import (
	"testing"

	"github.com/lovia-fleet/lovia/internal/fleettest"
)

// loviaBin and natsBin are the lovia binary and the nats CLI stand-in
// (natscli) the examples run.
var loviaBin, natsBin string

func TestMain(m *testing.M) {
	fleettest.MainWithBinaries(m,
		fleettest.Binary{Pkg: "../../cmd/cli", Path: &loviaBin},
		fleettest.Binary{Pkg: "./natscli", Path: &natsBin})
}
