// Command lovia is the Lovia Fleet command line: dev, worker, gateway, run,
// submit, tail, status, approve, cancel, inject and session. Run under the
// name worker or gateway (make build links bin/worker and bin/gateway to
// bin/lovia), it is that command: `worker --nats URL` is
// `lovia worker --nats URL`.
package main

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/lovia-fleet/lovia/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, commandArgs(os.Args), os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// commandArgs are the arguments cli.Main takes for the command line argv:
// argv[1:], after the command the binary's own name is (worker, gateway).
func commandArgs(argv []string) []string {
	if len(argv) == 0 {
		return nil
	}
	switch name := filepath.Base(argv[0]); name {
	case "worker", "gateway":
		return append([]string{name}, argv[1:]...)
	}
	return argv[1:]
}
