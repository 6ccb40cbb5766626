package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/gateway"
	"github.com/lovia-fleet/lovia/pkg/service"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// access is who may call a gateway: bearer tokens and browser origins.
type access struct {
	tokens  []string
	origins []string
}

// startGateway starts the HTTP gateway (which also serves the API service)
// and returns its URL and stop function.
func startGateway(ctx context.Context, env *Env, nc *nats.Conn, prefix, addr string, acc access, cat *catalog.Catalog, reg *prometheus.Registry, tp trace.TracerProvider, log *slog.Logger) (string, func(context.Context) error, error) {
	// Gateways do not claim runs: leave the workers consumer to workers,
	// and the replica counts to whoever set them.
	_, st, err := openFleet(ctx, nc, bus.ProvisionConfig{Prefix: prefix, SkipWorkers: true}, store.Config{Logger: log})
	if err != nil {
		return "", nil, err
	}
	api, err := service.NewAPI(service.Config{Conn: nc, Store: st, Prefix: prefix, Catalog: cat, Logger: log, AgentOptions: agentOptions(env), Tracing: tp})
	if err != nil {
		return "", nil, err
	}
	c, err := client.New(nc, client.Options{Prefix: prefix})
	if err != nil {
		return "", nil, err
	}
	gw, err := gateway.New(gateway.Config{API: api, Client: c, Conn: nc, Addr: addr, Tokens: acc.tokens, CORSOrigins: acc.origins, Logger: log, Metrics: reg})
	if err != nil {
		return "", nil, err
	}
	if err := gw.Start(ctx); err != nil {
		return "", nil, fmt.Errorf("gateway on %s: %w (use --http to pick another address)", addr, err)
	}
	return shownURL(gw.Addr()), gw.Stop, nil
}

// runGateway runs the HTTP gateway until ctx ends.
func runGateway(ctx context.Context, env *Env, args []string) int {
	fs := flagSet(env, "gateway", "[--nats URL] [--http ADDR] [--agents FILE] [--token T]... [--tenants FILE] [--cors-origin O]...")
	nf := addNATSFlags(fs, env)
	addr := fs.String("http", ":8080", "HTTP listen address")
	agents := fs.String("agents", "", "agents file: validate agent names and serve the agents list here too (with --tenants: each tenant's agents in the tenants file)")
	var tokens multiFlag
	fs.Var(&tokens, "token", "bearer token clients must present (repeatable; also $LOVIA_TOKENS, comma-separated)")
	tenantsPath := fs.String("tenants", "", "tenants file: serve several tenants, each a fleet in its own NATS account, with tokens bound to each (see the README's Tenants section)")
	var origins multiFlag
	fs.Var(&origins, "cors-origin", "origin whose browser pages may call the gateway, e.g. https://app.example.com, or * (repeatable)")
	logLevel := fs.String("log-level", "info", "log level")
	logFormat := fs.String("log-format", "", "log format: text or json (default $LOVIA_LOG_FORMAT, then text)")
	natsWait := addNATSWaitFlag(fs)
	if _, ok := parse(fs, args); !ok {
		return ExitUsage
	}
	for i, t := range tokens {
		if tokens[i] = strings.TrimSpace(t); tokens[i] == "" {
			return usageErr(env, fs, "--token is empty: give the token clients must present")
		}
	}
	if v := env.Getenv("LOVIA_TOKENS"); v != "" {
		n := len(tokens)
		for _, t := range strings.Split(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				tokens = append(tokens, t)
			}
		}
		if len(tokens) == n {
			// Set but empty of tokens: fail closed, not open to anyone.
			return fail(env.Stderr, errors.New("$LOVIA_TOKENS is set but holds no token: set it to comma-separated tokens, or unset it to serve without authentication"))
		}
	}
	log, err := logger(env, *logLevel, *logFormat)
	if err != nil {
		return usageErr(env, fs, err.Error())
	}
	tracing, stopTracing, err := startTracing(ctx, env, "lovia-gateway", log)
	if err != nil {
		return fail(env.Stderr, err)
	}
	defer stopTracing() // last: after the gateway's Stop
	var tenants []tenantEntry
	if *tenantsPath != "" {
		if len(tokens) > 0 {
			return usageErr(env, fs, "--tenants binds tokens to tenants: give tokens in the tenants file, not with --token or $LOVIA_TOKENS")
		}
		if *agents != "" {
			return usageErr(env, fs, "--tenants serves each tenant its own agents: give each tenant its agents file as `agents: FILE` in the tenants file, not with --agents")
		}
		if tenants, err = readTenants(env, *tenantsPath); err != nil {
			return fail(env.Stderr, err)
		}
	}
	var cat *catalog.Catalog
	if *agents != "" {
		deps, err := buildDeps(ctx, env, &workerFlags{agents: *agents, workspace: "workspace", listOnly: true}, fleetConn{}, log)
		if err != nil {
			return fail(env.Stderr, err)
		}
		cat = deps.catalog
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	if tenants != nil {
		url, stop, err := startTenantGateway(ctx, env, nf, tenants, *addr, origins, reg, tracing.TracerProvider(), log)
		if err != nil {
			return fail(env.Stderr, err)
		}
		names := make([]string, len(tenants))
		for i, t := range tenants {
			names[i] = t.Name
		}
		fmt.Fprintf(env.Stderr, "lovia gateway on %s serving tenants %s\n", url, strings.Join(names, ", "))
		return waitGateway(ctx, env, stop)
	}
	nc, err := nf.dial(ctx, "gateway", *natsWait, log)
	if err != nil {
		return fail(env.Stderr, err)
	}
	defer nc.Close()
	url, stop, err := startGateway(ctx, env, nc, nf.prefix, *addr, access{tokens: tokens, origins: origins}, cat, reg, tracing.TracerProvider(), log)
	if err != nil {
		return fail(env.Stderr, err)
	}
	fmt.Fprintf(env.Stderr, "lovia gateway on %s (NATS %s)\n", url, nf.shown())
	if len(tokens) == 0 {
		fmt.Fprintln(env.Stderr, "lovia gateway: no --token configured: anyone who can reach the address can submit and control runs")
	}
	return waitGateway(ctx, env, stop)
}

// waitGateway waits for ctx to end, then stops the gateway.
func waitGateway(ctx context.Context, env *Env, stop func(context.Context) error) int {
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := stop(sctx); err != nil {
		return fail(env.Stderr, err)
	}
	return ExitOK
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
