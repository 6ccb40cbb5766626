package cli

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/compaction"
	"github.com/lovia-fleet/lovia/pkg/provider"
	"github.com/lovia-fleet/lovia/pkg/service"
	"github.com/lovia-fleet/lovia/pkg/store"
	"github.com/lovia-fleet/lovia/pkg/tools"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// workerFlags configure workers (lovia worker and lovia dev).
type workerFlags struct {
	agents      string
	workspace   string
	concurrency int
	ackWait     time.Duration
	maxPending  int
	replicas    int
	coalesce    time.Duration
	parkAfter   time.Duration
	outage      time.Duration
	retention   time.Duration
	logLevel    string
	logFormat   string
	// listOnly builds agents for listing (the gateway): no MCP server
	// is started.
	listOnly bool
	registry bool
	serve    string
	// buildID and anyVersion: agent versions (worker.Config.BuildID,
	// ResumeAnyVersion).
	buildID    string
	anyVersion bool
}

func addWorkerFlags(fs *flag.FlagSet) *workerFlags {
	f := &workerFlags{}
	fs.StringVar(&f.agents, "agents", "", "agents file (YAML); default: the built-in demo agent")
	fs.StringVar(&f.workspace, "workspace", "workspace", "directory read_file and append_file are confined to")
	fs.IntVar(&f.concurrency, "concurrency", worker.DefaultConcurrency, "runs executed at once per worker")
	fs.DurationVar(&f.ackWait, "ack-wait", 0, "claim ack wait, fleet-wide: a silent worker loses its runs after this; unset: the fleet's (30s when new)")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&f.logFormat, "log-format", "", "log format: text or json (default $LOVIA_LOG_FORMAT, then text)")
	fs.IntVar(&f.maxPending, "max-ack-pending", 0, "runs the whole fleet may hold at once (every worker's --concurrency, plus headroom); unset: the fleet's (10000 when new)")
	fs.IntVar(&f.replicas, "replicas", 0, "replicas of the streams and buckets (3 on a cluster); unset: 1 for new ones, existing ones keep theirs")
	fs.DurationVar(&f.coalesce, "coalesce", 50*time.Millisecond, "send streamed text as one event at most this often (0: one event per model delta)")
	fs.DurationVar(&f.outage, "outage-budget", store.DefaultOutageBudget, "how long a store call or an event publish retries a broker outage (a leader election, a lost quorum, a restart) before the run is released for later instead; negative: no retries")
	fs.BoolVar(&f.registry, "registry", false, "serve the agents registry (lovia agents apply FILE) and follow its changes; with --agents, the file seeds the registry first")
	fs.StringVar(&f.serve, "serve", "", "with --registry: serve only the agents matching these comma-separated globs (e.g. 'support,billing-*')")
	fs.DurationVar(&f.retention, "retention", store.DefaultRetention, "keep an ended run's record, checkpoint and mailbox this long after its last change, then expire them (0 or negative: keep for ever; live and parked runs never expire)")
	fs.DurationVar(&f.parkAfter, "park-after", worker.DefaultParkAfter, "an approval wait longer than this parks the run off the worker until a decision, a cancel or its deadline (negative: never park)")
	fs.StringVar(&f.buildID, "build-id", "", "this build's id (a release tag, a commit), part of the agent versions runs record (default $LOVIA_BUILD_ID)")
	fs.BoolVar(&f.anyVersion, "resume-any-version", false, "resume runs started on another agent version at once, instead of giving them back while a worker of that version is live")
	return f
}

func logger(env *Env, level string, format ...string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	f := logFormat(env, format...)
	switch f {
	case "", "text":
		return slog.New(slog.NewTextHandler(env.Stderr, opts)), nil
	case "json":
		opts.ReplaceAttr = durationText
		return slog.New(slog.NewJSONHandler(env.Stderr, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format (or LOVIA_LOG_FORMAT) %q: use text or json", f)
	}
}

// logFormat is the log format asked for: the flag's, else
// $LOVIA_LOG_FORMAT.
func logFormat(env *Env, format ...string) string {
	if len(format) > 0 && format[0] != "" {
		return format[0]
	}
	return env.Getenv("LOVIA_LOG_FORMAT")
}

// durationText writes durations as Go durations ("30s") in JSON logs,
// as the text format does, not as integers of nanoseconds.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// startFailure reports an error that stops a long-lived process (a
// worker, a gateway) as it starts: in JSON mode as a JSON log line at
// level ERROR (what collects the logs parses every line), else as the
// CLI's "lovia: …" line.
func startFailure(env *Env, log *slog.Logger, format string, err error) int {
	if logFormat(env, format) == "json" && log != nil {
		log.Error("lovia: "+strings.TrimPrefix(err.Error(), "lovia: "), "exit", ExitFailure)
		return ExitFailure
	}
	return fail(env.Stderr, err)
}

// fleetDeps are the pieces a worker or gateway process builds once.
type fleetDeps struct {
	registry *loop.Registry
	catalog  *catalog.Catalog
	remote   *remoteTools         // MCP servers and tool services; nil without
	plugins  *nats.Conn           // the plugins' stores (plugins.go); nil without
	tracing  trace.TracerProvider // tracing.go; nil: off
	code     *Code                // a Go program's agents and deps; nil without
}

func buildDeps(ctx context.Context, env *Env, wf *workerFlags, fc fleetConn, log *slog.Logger) (*fleetDeps, error) {
	reg := provider.NewRegistry(provider.Config{Getenv: env.Getenv})
	ts, err := tools.Builtin(tools.Config{Workspace: wf.workspace})
	if err != nil {
		return nil, err
	}
	copts := catalog.Options{Tools: ts, Registry: reg}
	if wf.agents != "" {
		stores, pc, err := pluginStores(fc)
		if err != nil {
			return nil, err
		}
		stores.Replicas, stores.Logger = wf.replicas, log
		copts.Plugins = stores
		if stores.JetStream != nil {
			copts.Compaction = compactionPolicies(ctx, stores.JetStream, stores.Names, wf.replicas, log)
		}
		cat, remote, err := loadAgents(ctx, env, wf.agents, copts, wf.listOnly, fc, log)
		if err != nil {
			if pc != nil {
				pc.Close()
			}
			return nil, err
		}
		if cat, err = codeCatalog(env, cat, true); err != nil {
			if pc != nil {
				pc.Close()
			}
			_ = remote.stop(ctx)
			return nil, err
		}
		return &fleetDeps{registry: reg, catalog: cat, remote: remote, plugins: pc, code: env.Code}, nil
	}
	cat, err := catalog.Default(copts)
	if err != nil {
		return nil, err
	}
	if cat, err = codeCatalog(env, cat, false); err != nil {
		return nil, err
	}
	return &fleetDeps{registry: reg, catalog: cat, code: env.Code}, nil
}

// openFleet provisions (idempotently) and opens the stores, with sc's
// outage budget and logger. Both wait for a cluster that is still forming
// (with progress on the logger) until ctx ends.
func openFleet(ctx context.Context, nc *nats.Conn, pc bus.ProvisionConfig, sc store.Config) (jetstream.JetStream, *store.Store, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, nil, err
	}
	if pc.Logger == nil {
		pc.Logger = sc.Logger
	}
	if _, err := bus.Provision(ctx, js, pc); err != nil {
		return nil, nil, err
	}
	names, _ := bus.NewNames(pc.Prefix)
	sc.CheckpointBucket, sc.SessionBucket = names.CheckpointsBucket(), names.SessionsBucket()
	sc.MailboxBucket, sc.RunBucket = names.MailboxBucket(), names.RunsBucket()
	st, err := store.Open(ctx, js, sc)
	return js, st, err
}

// runWorker runs one worker process until ctx ends.
func runWorker(ctx context.Context, env *Env, args []string) int {
	fs := flagSet(env, "worker", "[--nats URL] [--agents FILE] [--id NAME] [--concurrency N] [--workspace DIR]")
	nf := addNATSFlags(fs, env)
	wf := addWorkerFlags(fs)
	codeFlagHelp(env, fs)
	id := fs.String("id", "", "worker id (default <hostname>-<pid>)")
	metricsAddr := fs.String("metrics", "", "serve Prometheus /metrics and the /healthz and /readyz probes on this address (e.g. :9091)")
	natsWait := addNATSWaitFlag(fs)
	if _, ok := parse(fs, args); !ok {
		return ExitUsage
	}
	if wf.buildID == "" {
		wf.buildID = env.Getenv("LOVIA_BUILD_ID")
	}
	if !worker.ValidBuildID(wf.buildID) {
		return usageErr(env, fs, fmt.Sprintf("--build-id (or LOVIA_BUILD_ID) %q: use up to 64 characters of [A-Za-z0-9._-]", wf.buildID))
	}
	log, err := logger(env, wf.logLevel, wf.logFormat)
	if err != nil {
		return usageErr(env, fs, err.Error())
	}
	tracing, stopTracing, err := startTracing(ctx, env, "lovia-worker", log)
	if err != nil {
		return startFailure(env, log, wf.logFormat, err)
	}
	defer stopTracing() // last: after the worker's Stop
	if wf.agents != "" {
		// A typo is said at once, before waiting on a server.
		if _, err := checkAgentsFile(env, wf.agents, wf.workspace); err != nil {
			return startFailure(env, log, wf.logFormat, err)
		}
		if err := checkCodeNames(env, wf.agents); err != nil {
			return startFailure(env, log, wf.logFormat, err)
		}
	}
	connect := func(name string) (*nats.Conn, error) { return nf.dial(ctx, name, *natsWait, log) }
	nc, err := connect("worker")
	if err != nil {
		return startFailure(env, log, wf.logFormat, err)
	}
	defer nc.Close()
	deps, err := buildDeps(ctx, env, wf, fleetConn{prefix: nf.prefix, connect: connect}, log)
	if err != nil {
		return startFailure(env, log, wf.logFormat, err)
	}
	defer stopDeps(deps) // after the worker's Stop below
	deps.tracing = tracing.TracerProvider()
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	probeAgents := deps.catalog.Names()
	if wf.registry {
		probeAgents = nil // known once the worker has read the registry
	}
	probes, err := newWorkerProbes(nc, nf.prefix, probeAgents)
	if err != nil {
		return usageErr(env, fs, err.Error())
	}
	addr, stopMetrics, err := serveMetrics(*metricsAddr, reg, probes, log)
	if err != nil {
		return startFailure(env, log, wf.logFormat, err)
	}
	defer stopMetrics()
	if addr != "" {
		log.Info("metrics", "addr", "http://"+addr+"/metrics", "probes", "/healthz /readyz")
	}
	w, svc, err := startWorkerProcess(ctx, nc, nf.prefix, *id, wf, deps, reg, log)
	if err != nil {
		return startFailure(env, log, wf.logFormat, err)
	}
	if wf.registry {
		if err := probes.setAgents(w.Agents()); err != nil {
			return startFailure(env, log, wf.logFormat, err)
		}
	}
	probes.started()
	up := fmt.Sprintf("lovia worker %s serving agents %s on %s", w.ID(), strings.Join(w.Agents(), ", "), nf.shown())
	if len(w.Agents()) == 0 {
		up = fmt.Sprintf("lovia worker %s serving no agent yet on %s: the registry has none it can serve (lovia agents apply FILE)", w.ID(), nf.shown())
	}
	if logFormat(env, wf.logFormat) == "json" {
		log.Info(up) // every line of a JSON log is JSON
	} else {
		fmt.Fprintln(env.Stderr, up)
	}
	<-ctx.Done()
	probes.stopping()
	stopCtx, cancel := context.WithTimeout(context.Background(), WorkerStopTimeout)
	defer cancel()
	_ = svc.Stop(stopCtx)
	if err := w.Stop(stopCtx); err != nil {
		return startFailure(env, log, wf.logFormat, err)
	}
	return ExitOK
}

// compactionPolicies builds the context policies of agents whose
// `compaction:` section tunes theirs, with the fleet's results store (as
// the worker's default policy has it), opened at the first such agent.
func compactionPolicies(ctx context.Context, js jetstream.JetStream, names bus.Names, replicas int, log *slog.Logger) func(compaction.Config) (loop.ContextPolicy, error) {
	var (
		mu      sync.Mutex
		results *store.ResultStore
	)
	return func(cfg compaction.Config) (loop.ContextPolicy, error) {
		mu.Lock()
		defer mu.Unlock()
		if results == nil {
			rs, err := store.OpenResultStore(ctx, js, store.ResultStoreConfig{Bucket: names.ResultsBucket(), Replicas: replicas, Logger: log})
			if err != nil {
				return nil, err
			}
			results = rs
		}
		cfg.Store, cfg.Logger = results, log
		return compaction.New(cfg), nil
	}
}

// startWorkerProcess provisions, opens stores, starts the API service and
// one worker.
func startWorkerProcess(ctx context.Context, nc *nats.Conn, prefix, id string, wf *workerFlags, deps *fleetDeps, reg prometheus.Registerer, log *slog.Logger) (*worker.Worker, *service.Service, error) {
	if err := checkRetention(wf.retention); err != nil {
		return nil, nil, err
	}
	pc := bus.ProvisionConfig{Prefix: prefix, Replicas: wf.replicas}
	pc.Workers.AckWait, pc.Workers.MaxAckPending = wf.ackWait, wf.maxPending
	sc := store.Config{OutageBudget: wf.outage, Retention: storeRetention(wf.retention), Logger: log}
	js, st, err := openFleet(ctx, nc, pc, sc)
	if err != nil {
		return nil, nil, err
	}
	// Offloaded tool outputs go to the shared object store, so a recall
	// works on whichever worker the run is on.
	names, _ := bus.NewNames(prefix) // openFleet checked it
	results, err := store.OpenResultStore(ctx, js, store.ResultStoreConfig{Bucket: names.ResultsBucket(), Replicas: wf.replicas, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	policy := compaction.New(compaction.Config{Store: results, Logger: log})
	agents, apiCatalog, err := registryAgents(ctx, js, names, wf, deps, log)
	if err != nil {
		return nil, nil, err
	}
	api, err := service.NewAPI(service.Config{Conn: nc, Store: st, Prefix: prefix, Catalog: apiCatalog, Logger: log, AgentOptions: catalog.Options{Tools: builtinTools(wf.workspace), Registry: deps.registry}, Tracing: deps.tracing})
	if err != nil {
		return nil, nil, err
	}
	svc := service.New(api)
	if err := svc.Start(ctx); err != nil {
		return nil, nil, err
	}
	w, err := worker.New(worker.Config{
		Conn: nc, Catalog: deps.catalog, Agents: agents, Prefix: prefix, ID: id, Concurrency: wf.concurrency, AckWait: wf.ackWait, CoalesceDeltas: wf.coalesce, ParkAfter: wf.parkAfter,
		BuildID: wf.buildID, ResumeAnyVersion: wf.anyVersion,
		Provision: pc, SkipProvision: true, Registry: deps.registry, ContextPolicy: policy, Logger: log, Metrics: reg,
		Store: sc, Tracing: deps.tracing, Deps: deps.codeDeps(),
	})
	if err != nil {
		_ = svc.Stop(ctx)
		return nil, nil, err
	}
	if err := w.Start(ctx); err != nil {
		_ = svc.Stop(ctx)
		return nil, nil, err
	}
	return w, svc, nil
}

// runDev starts everything in one process: an embedded NATS server that
// other processes can join, the API service, N workers and the demo agent.
func runDev(ctx context.Context, env *Env, args []string) int {
	fs := flagSet(env, "dev", "[--agents FILE] [--workers N] [--http ADDR] [--cors-origin O]... [--nats-port PORT] [--data DIR]")
	wf := addWorkerFlags(fs)
	codeFlagHelp(env, fs)
	workers := fs.Int("workers", 2, "number of workers")
	httpAddr := fs.String("http", ":8080", "gateway HTTP address")
	var origins multiFlag
	fs.Var(&origins, "cors-origin", "origin whose browser pages may call the gateway, e.g. http://localhost:5173, or * (repeatable)")
	natsPort := fs.Int("nats-port", 4222, "NATS client port (0 picks a free one)")
	data := fs.String("data", filepath.Join(".lovia", "data"), "JetStream store directory")
	prefix := fs.String("prefix", "lovia", "subject prefix")
	if _, ok := parse(fs, args); !ok {
		return ExitUsage
	}
	if *workers < 1 {
		return usageErr(env, fs, "--workers must be at least 1")
	}
	if err := devPortsFree(*natsPort, *httpAddr); err != nil {
		return fail(env.Stderr, err)
	}
	if wf.maxPending == 0 {
		// dev owns its embedded server: size the fleet-wide claim limit for
		// its workers, whatever an older store directory recorded.
		wf.maxPending = max(bus.DefaultWorkersAckPending, *workers*wf.concurrency)
	}
	log, err := logger(env, wf.logLevel, wf.logFormat)
	if err != nil {
		return usageErr(env, fs, err.Error())
	}
	tracing, stopTracing, err := startTracing(ctx, env, "lovia-dev", log)
	if err != nil {
		return fail(env.Stderr, err)
	}
	defer stopTracing() // last: after every component stopped
	if wf.agents != "" {
		// A typo is said at once, before the server starts.
		if _, err := checkAgentsFile(env, wf.agents, wf.workspace); err != nil {
			return fail(env.Stderr, err)
		}
		if err := checkCodeNames(env, wf.agents); err != nil {
			return fail(env.Stderr, err)
		}
	}
	if err := os.MkdirAll(*data, 0o755); err != nil {
		return fail(env.Stderr, fmt.Errorf("dev: data directory: %w: pick another with --data DIR", err))
	}
	release, err := lockDevData(*data)
	if err != nil {
		return fail(env.Stderr, err)
	}
	defer release() // last but tracing: after the server stopped
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: *data, Port: *natsPort, ServerName: "lovia-dev"})
	if err != nil {
		return fail(env.Stderr, fmt.Errorf("embedded NATS on port %d: %w (use --nats-port to pick another)", *natsPort, err))
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	deps, err := buildDeps(ctx, env, wf, fleetConn{prefix: *prefix, connect: devConnect(srv.ClientURL())}, log)
	if err != nil {
		return fail(env.Stderr, err)
	}
	deps.tracing = tracing.TracerProvider()
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	// Stopped in reverse: the gateway, then each worker (its ordered
	// shutdown acks or releases its runs) before the connection it uses is
	// closed, then the MCP servers.
	stops := []func(context.Context) error{deps.stop}
	closer := func(nc *nats.Conn) func(context.Context) error {
		return func(context.Context) error { nc.Close(); return nil }
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for i := len(stops) - 1; i >= 0; i-- {
			_ = stops[i](sctx)
		}
	}()
	for i := 1; i <= *workers; i++ {
		nc, err := nats.Connect(srv.ClientURL(), nats.Name(fmt.Sprintf("lovia dev worker %d", i)))
		if err != nil {
			return fail(env.Stderr, err)
		}
		stops = append(stops, closer(nc))
		w, svc, err := startWorkerProcess(ctx, nc, *prefix, fmt.Sprintf("dev-%d", i), wf, deps, reg, log)
		if err != nil {
			return fail(env.Stderr, err)
		}
		stops = append(stops, w.Stop, svc.Stop)
	}
	gwNC, err := nats.Connect(srv.ClientURL(), nats.Name("lovia dev gateway"))
	if err != nil {
		return fail(env.Stderr, err)
	}
	stops = append(stops, closer(gwNC))
	httpURL, stopGW, err := startGateway(ctx, env, gwNC, *prefix, *httpAddr, access{origins: origins}, deps.catalog, reg, deps.tracing, log)
	if err != nil {
		return fail(env.Stderr, err)
	}
	stops = append(stops, stopGW)
	names, _ := bus.NewNames(*prefix) // the workers' Provision checked it
	fmt.Fprintf(env.Stdout, `lovia dev is up
  NATS      %s   (nats sub '%s' to watch every run)
  HTTP      %s
  workers   %d, agents: %s

try:
%s`, srv.ClientURL(), names.EventsWildcard(), httpURL, *workers, strings.Join(deps.catalog.Names(), ", "), devTry(names, deps.catalog.Names(), *prefix))
	<-ctx.Done()
	fmt.Fprintln(env.Stderr, "lovia dev: shutting down")
	return ExitOK
}
