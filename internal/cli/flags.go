package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lovia-fleet/lovia/pkg/client"
)

// flagSet builds a flag set that reports errors to stderr.
func flagSet(env *Env, name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(env.Stderr, "usage: lovia %s %s\n\nflags:\n", name, usage)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags that may be interspersed with positional arguments
// and returns the positionals. ok is false after a usage error (or -h).
func parse(fs *flag.FlagSet, args []string) (pos []string, ok bool) {
	for {
		if err := fs.Parse(args); err != nil {
			return nil, false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, true
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// natsFlags are the flags of every command that talks to a fleet.
type natsFlags struct {
	url    string
	prefix string
}

func addNATSFlags(fs *flag.FlagSet, env *Env) *natsFlags {
	f := &natsFlags{}
	def := env.Getenv("NATS_URL")
	if def == "" {
		def = "nats://127.0.0.1:4222"
	}
	fs.StringVar(&f.url, "nats", def, "NATS server URL (default $NATS_URL, then nats://127.0.0.1:4222)")
	fs.StringVar(&f.prefix, "prefix", "lovia", "subject prefix")
	return f
}

func (f *natsFlags) connect(name string) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name("lovia " + name), nats.Timeout(5 * time.Second)}
	if name == "worker" || name == "gateway" {
		// Long-lived processes keep reconnecting for as long as they run,
		// and notice a server that stopped answering (a paused or
		// partitioned node) within about 15s instead of the library's 4
		// minutes, so they move to another node of the cluster.
		opts = append(opts, nats.MaxReconnects(-1), nats.PingInterval(5*time.Second), nats.MaxPingsOutstanding(3))
	}
	nc, err := nats.Connect(f.url, opts...)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to NATS at %s: %w (start one with `lovia dev`, or pass --nats / set NATS_URL)", f.url, err)
	}
	return nc, nil
}

func (f *natsFlags) client(name string) (*client.Client, *nats.Conn, error) {
	nc, err := f.connect(name)
	if err != nil {
		return nil, nil, err
	}
	c, err := client.New(nc, client.Options{Prefix: f.prefix})
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return c, nc, nil
}

func fail(w io.Writer, err error) int {
	msg := err.Error()
	if !strings.HasPrefix(msg, "lovia:") {
		msg = "lovia: " + msg
	}
	fmt.Fprintln(w, msg)
	return ExitFailure
}

// requestCtx bounds a one-shot request.
func requestCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 15*time.Second)
}
