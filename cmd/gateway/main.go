// Command gateway serves the HTTP gateway of a Lovia fleet
// (docs/protocol.md#http-gateway) and the `lovia` NATS micro service; it is
// `lovia gateway` under its own name (same flags):
//
//	gateway [--nats URL] [--nats-wait 2m] [--http ADDR] [--prefix P] [--token T]... [--agents FILE] [--tenants FILE]
//
// It waits up to --nats-wait for NATS at start, serves until SIGINT or
// SIGTERM, then stops gracefully. The routes live
// in package gateway, the wiring in the command line's gateway command.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/lovia-fleet/lovia/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// run is `lovia gateway ARGS`; it returns the exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	return cli.Main(ctx, append([]string{"gateway"}, args...), stdin, stdout, stderr, getenv)
}
