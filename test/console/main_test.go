// Package console tests the fleet console in a real browser: headless
// Chromium, driven by chromedp, against a fleet with the gateway, a
// scripted agent and a `lovia worker` process that the tests kill -9.
package console

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// loviaBin is the lovia binary built for these tests.
var loviaBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lovia-console-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	loviaBin = filepath.Join(dir, "lovia")
	build := exec.Command("go", "build", "-o", loviaBin, "../../cmd/cli")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building lovia:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(
			goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"),
			goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*stream).trySetupSourceConsumer.func3"),
		); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
