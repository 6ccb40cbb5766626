//go:build scale

package scale

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
