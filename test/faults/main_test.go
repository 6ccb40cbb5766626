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
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// Binaries built for these tests.
var (
	natsServerBin string
	loviaBin      string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lovia-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	natsServerBin = filepath.Join(dir, "nats-server")
	loviaBin = filepath.Join(dir, "lovia")
	for _, b := range []struct{ out, pkg string }{
		{natsServerBin, "github.com/nats-io/nats-server/v2"},
		{loviaBin, "../../cmd/cli"},
	} {
		build := exec.Command("go", "build", "-o", b.out, b.pkg)
		build.Stdout, build.Stderr = os.Stdout, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building", b.pkg+":", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
