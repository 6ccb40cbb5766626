// Command worker runs a Lovia Fleet worker with the built-in tools; it is
// `lovia worker` under its own name (same flags).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/lovia-fleet/lovia/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, append([]string{"worker"}, os.Args[1:]...), os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
