// Command gateway serves the HTTP gateway of a Lovia fleet (PROTOCOL.md,
// "HTTP gateway") and the `lovia` NATS micro service:
//
//	gateway [--nats URL] [--http ADDR] [--prefix P] [--token T]... [--agents FILE]
//
// It provisions the streams and buckets it needs, serves until SIGINT or
// SIGTERM, then stops gracefully. The routes live in package gateway.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/gateway"
	"github.com/lovia-fleet/lovia/pkg/provider"
	"github.com/lovia-fleet/lovia/pkg/service"
	"github.com/lovia-fleet/lovia/pkg/store"
	"github.com/lovia-fleet/lovia/pkg/tools"
)

// Exit statuses (PROTOCOL.md, "Command line").
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stderr)
	stop()
	os.Exit(code)
}

// options are the command's flags.
type options struct {
	nats, http, prefix, agents string
	tokens                     []string
}

// run serves until ctx ends and returns the exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	o, err := parseFlags(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if err := serve(ctx, o, getenv, log); err != nil {
		log.Error("gateway failed", "error", err)
		return exitFailure
	}
	return exitOK
}

// tokenList is a repeatable --token.
type tokenList []string

func (t *tokenList) String() string { return fmt.Sprintf("%d token(s)", len(*t)) }

func (t *tokenList) Set(v string) error {
	if strings.TrimSpace(v) == "" {
		return errors.New("a token must not be empty")
	}
	*t = append(*t, strings.TrimSpace(v))
	return nil
}

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	natsURL := getenv("NATS_URL")
	if natsURL == "" {
		natsURL = nats.DefaultURL
	}
	var o options
	var tokens tokenList
	fs.StringVar(&o.nats, "nats", natsURL, "NATS server URL(s); $NATS_URL when set")
	fs.StringVar(&o.http, "http", gateway.DefaultAddr, "HTTP listen address")
	fs.StringVar(&o.prefix, "prefix", bus.DefaultPrefix, "subject prefix of the fleet")
	fs.Var(&tokens, "token", "accepted bearer token (repeatable; also $LOVIA_TOKENS, comma-separated); none: no authentication")
	fs.StringVar(&o.agents, "agents", "", "agents file: validate agent names on submit and serve /v1/agents (default: leave both to the workers)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: gateway [--nats URL] [--http ADDR] [--prefix P] [--token T]... [--agents FILE]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "gateway: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return o, errors.New("unexpected arguments")
	}
	for t := range strings.SplitSeq(getenv("LOVIA_TOKENS"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			tokens = append(tokens, t)
		}
	}
	o.tokens = tokens
	return o, nil
}

// serve wires NATS, the stores, the API, the client and the gateway, and
// serves until ctx ends.
func serve(ctx context.Context, o options, getenv func(string) string, log *slog.Logger) error {
	names, err := bus.NewNames(o.prefix)
	if err != nil {
		return fmt.Errorf("--prefix: %w", err)
	}
	var cat *catalog.Catalog
	if o.agents != "" {
		ts, err := tools.Builtin(tools.Config{})
		if err != nil {
			return err
		}
		reg := provider.NewRegistry(provider.Config{Getenv: getenv})
		if cat, err = catalog.Load(o.agents, catalog.Options{Tools: ts, Registry: reg}); err != nil {
			return fmt.Errorf("--agents %s: %w", o.agents, err)
		}
	}
	nc, err := nats.Connect(o.nats, nats.Name("lovia-gateway"), nats.MaxReconnects(-1))
	if err != nil {
		return fmt.Errorf("connect to NATS at %s: %w", o.nats, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	// The workers own their consumer's settings (ack wait); leave it alone.
	if _, err := bus.Provision(ctx, js, bus.ProvisionConfig{Prefix: names.Prefix(), SkipWorkers: true, Logger: log}); err != nil {
		return err
	}
	st, err := store.Open(ctx, js, store.Config{
		CheckpointBucket: names.CheckpointsBucket(), SessionBucket: names.SessionsBucket(),
		MailboxBucket: names.MailboxBucket(), RunBucket: names.RunsBucket(), Logger: log,
	})
	if err != nil {
		return err
	}
	api, err := service.NewAPI(service.Config{Conn: nc, Store: st, Prefix: names.Prefix(), Catalog: cat, Logger: log})
	if err != nil {
		return err
	}
	cl, err := client.New(nc, client.Options{Prefix: names.Prefix()})
	if err != nil {
		return err
	}
	metrics := prometheus.NewRegistry()
	metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	gw, err := gateway.New(gateway.Config{API: api, Client: cl, Conn: nc, Addr: o.http, Tokens: o.tokens, Logger: log, Metrics: metrics})
	if err != nil {
		return err
	}
	if len(o.tokens) == 0 {
		log.Warn("no --token or LOVIA_TOKENS: the gateway accepts every request")
	}
	if cat == nil {
		log.Info("no --agents: agent names are checked by the workers, /v1/agents asks the fleet")
	}
	if err := gw.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	log.Info("stopping the gateway", "cause", context.Cause(ctx))
	return gw.Stop(context.WithoutCancel(ctx))
}
