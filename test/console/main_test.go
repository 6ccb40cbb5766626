// Package console tests the fleet console in a real browser: headless
// Chromium, driven by chromedp, against a fleet with the gateway, a
// scripted agent and a `lovia worker` process that the tests kill -9.
package console

import (
	"testing"

	"github.com/lovia-fleet/lovia/internal/fleettest"
)

// loviaBin is the lovia binary built for these tests.
var loviaBin string

func TestMain(m *testing.M) {
	fleettest.MainWithBinaries(m, fleettest.Binary{Pkg: "../../cmd/cli", Path: &loviaBin})
}
