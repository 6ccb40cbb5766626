package gateway

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/service"
)

// Gateway serves the HTTP API of docs/protocol.md#http-gateway and, while
// started, the `lovia` NATS micro service. It holds no run state: any
// number of gateways can serve one fleet. Its methods are safe for
// concurrent use.
type Gateway struct {
	cfg     Config
	log     *slog.Logger
	m       *metrics
	pub     *bus.Publisher // reads runs' last seqs; publishes nothing
	svc     *service.Service
	tokens  [][sha256.Size]byte
	origins []string // normalized Config.CORSOrigins
	handler http.Handler
	mux     *http.ServeMux // the routes (set by routes)
	// tenants are the gateways of the tenants a gateway built with
	// Config.Tenants serves (tenants.go); empty for one fleet.
	tenants []*Gateway
	// tenant names the tenant of a tenant's gateway; empty otherwise.
	tenant string
	// tmu guards the entries of tenants: a tenant given with Open is a
	// placeholder until it is opened (tenants.go).
	tmu sync.RWMutex
	// opens are the tenants of Config.Tenants; openStop and openWG stop
	// and wait for the goroutines that open those with Open.
	opens    []Tenant
	openStop context.CancelFunc
	openWG   sync.WaitGroup
	// openErr is, on a tenant's placeholder, why opening it last failed
	// (nil pointer inside until it fails once); nil on other gateways.
	openErr *atomic.Pointer[string]

	// drain is cancelled when Stop begins: SSE streams end so that the
	// server can shut down, and their clients resume elsewhere.
	drain     context.Context
	drainStop context.CancelFunc

	mu      sync.Mutex
	state   lifecycle
	srv     *http.Server
	addr    string
	served  chan struct{} // closed when Serve returned
	stopped chan struct{} // closed when Stop finished
	stopErr error
}

type lifecycle int

const (
	stateNew lifecycle = iota
	stateStarted
	stateStopped
)

// New builds a gateway. It validates cfg (the error names the bad field)
// and registers the metrics; it starts nothing: see Start, or serve
// Handler yourself.
func New(cfg Config) (*Gateway, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if len(cfg.Tenants) == 0 {
		g, err := newFleet(cfg, cfg.Metrics)
		if err != nil {
			return nil, err
		}
		g.drain, g.drainStop = context.WithCancel(context.Background())
		g.handler = g.traced(g.routes()) // tracing.go
		return g, nil
	}
	return newTenants(cfg)
}

// newFleet builds the gateway of one fleet (one tenant), registering its
// metrics in reg.
func newFleet(cfg Config, reg prometheus.Registerer) (*Gateway, error) {
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	if _, err := register(reg, prometheus.Collector(newRunCounts(cfg.API))); err != nil {
		return nil, fmt.Errorf("gateway: register metrics: %w", err)
	}
	js, err := jetstream.New(cfg.Conn)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	pub, err := bus.NewPublisher(js, bus.PublisherConfig{Prefix: cfg.API.Names().Prefix()})
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g := &Gateway{cfg: cfg, log: cfg.Logger, m: m, pub: pub, svc: service.New(cfg.API), stopped: make(chan struct{}), tokens: tokenSums(cfg.Tokens)}
	for _, o := range cfg.CORSOrigins {
		g.origins = append(g.origins, normalizeOrigin(o))
	}
	return g, nil
}

// tokenSums are the SHA-256 sums of tokens, which a request's token is
// compared with (bound, tenantOf).
func tokenSums(tokens []string) [][sha256.Size]byte {
	var sums [][sha256.Size]byte
	for _, t := range tokens {
		sums = append(sums, sha256.Sum256([]byte(t)))
	}
	return sums
}

// Handler returns the gateway's HTTP handler: every route, with
// authentication and metrics. Start serves it; tests and embedders may
// serve it themselves (then the micro service is theirs to run).
func (g *Gateway) Handler() http.Handler { return g.handler }

// Addr returns the address the gateway listens on once started (with the
// port the system picked for port 0), else the configured address.
func (g *Gateway) Addr() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.addr != "" {
		return g.addr
	}
	return g.cfg.Addr
}

// Start listens on Config.Addr, starts the `lovia` micro service on the
// API's connection and serves HTTP in a goroutine that Stop waits for. It
// returns once the listener is open. A gateway starts once: a second Start
// is ErrStarted, a Start after Stop ErrStopped.
func (g *Gateway) Start(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch g.state {
	case stateStarted:
		return ErrStarted
	case stateStopped:
		return ErrStopped
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", g.cfg.Addr)
	if err != nil {
		return fmt.Errorf("gateway: listen on %s: %w", g.cfg.Addr, err)
	}
	for i, t := range g.fleets() {
		if t.opening() {
			continue // openTenants, below
		}
		// The console's first page, and the run metrics, should not wait
		// for the run index to load (about a second at 100,000 runs).
		if err := t.cfg.API.WarmRunIndex(ctx); err != nil {
			g.log.Warn("gateway: the run index did not start; the first listing starts it", "error", err, "tenant", t.tenant)
		}
		if err := t.svc.Start(ctx); err != nil {
			for _, started := range g.fleets()[:i] {
				if !started.opening() {
					_ = started.svc.Stop(ctx)
				}
			}
			_ = ln.Close()
			return fmt.Errorf("gateway: start the lovia micro service%s: %w", t.tenantSuffix(), err)
		}
	}
	g.srv = &http.Server{
		Handler:           g.handler,
		ReadHeaderTimeout: g.cfg.ReadHeaderTimeout,
		IdleTimeout:       g.cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
	}
	g.addr = ln.Addr().String()
	g.served = make(chan struct{})
	go func(srv *http.Server, served chan<- struct{}) {
		defer close(served)
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			g.log.Error("gateway: serving HTTP failed", "addr", ln.Addr().String(), "error", err)
		}
	}(g.srv, g.served)
	g.state = stateStarted
	g.log.Info("gateway listening", "addr", g.addr)
	g.openTenants() // tenants.go
	return nil
}

// Stop shuts down gracefully: SSE streams end at once (clients resume with
// Last-Event-ID), other requests in flight finish, then the micro service
// stops. Requests still running when ctx ends — or, with no deadline,
// after Config.ShutdownTimeout — are cut off and Stop reports it. Stop
// before Start, and a second Stop, return at once (the second with the
// first's result once it finished).
func (g *Gateway) Stop(ctx context.Context) error {
	g.mu.Lock()
	switch g.state {
	case stateNew:
		g.state = stateStopped
		g.drainStop()
		close(g.stopped)
		g.mu.Unlock()
		return nil
	case stateStopped:
		g.mu.Unlock()
		select {
		case <-g.stopped:
			return g.stopErr
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	g.state = stateStopped
	srv, served := g.srv, g.served
	g.mu.Unlock()

	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.cfg.ShutdownTimeout)
		defer cancel()
	}
	g.drainStop()
	var errs []error
	if err := srv.Shutdown(ctx); err != nil {
		_ = srv.Close()
		errs = append(errs, fmt.Errorf("gateway: shutdown: %w (requests still running were cut off)", err))
	}
	<-served
	if g.openStop != nil {
		g.openStop()
		g.openWG.Wait() // a tenant opened meanwhile is in fleets now
	}
	for _, t := range g.fleets() {
		if t.opening() {
			continue
		}
		if err := t.svc.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("gateway: stop the lovia micro service%s: %w", t.tenantSuffix(), err))
		}
	}
	g.stopErr = errors.Join(errs...)
	close(g.stopped)
	g.log.Info("gateway stopped", "addr", g.addr)
	return g.stopErr
}
