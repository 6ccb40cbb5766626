package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// WorkerStopTimeout bounds a worker process's ordered shutdown after
// SIGTERM: stop claiming, let runs finish within the worker's shutdown
// grace (worker.DefaultShutdownGrace), then interrupt the rest at a
// checkpoint and release them to another worker. A pod's
// terminationGracePeriodSeconds must be longer.
const WorkerStopTimeout = 30 * time.Second

// probeTimeout bounds the NATS request behind one readiness answer; it is
// shorter than the probes' timeoutSeconds in deploy/kubernetes.
const probeTimeout = 2 * time.Second

// Worker process states, as /readyz reports them.
const (
	probeStarting int32 = iota // provisioning, not claiming yet
	probeReady                 // Start returned: the worker is claiming
	probeStopping              // the ordered shutdown has begun
)

// workerProbes answers a worker process's probes on its --metrics listener.
//
// GET /healthz is liveness: 200 while the process serves HTTP and its
// NATS connection is connected or reconnecting. A NATS outage is not a
// reason to restart a worker (its connection reconnects for as long as
// it runs); a closed connection is: it never comes back, so liveness
// answers 503 and the process should be restarted.
//
// GET /readyz is readiness: 200 once the worker has provisioned (or found)
// the streams and is claiming, while NATS is connected and the consumers
// of its agents answer; 503 with the reason otherwise (reconnecting,
// closed), and from the moment the ordered shutdown begins.
type workerProbes struct {
	nc        *nats.Conn
	js        jetstream.JetStream
	stream    string
	names     bus.Names
	mu        sync.Mutex
	consumers []string // the consumers of the worker's agents
	state     atomic.Int32
}

// setAgents sets the agents whose consumers readiness checks (before the
// worker starts: with --registry they are known only then).
func (p *workerProbes) setAgents(agents []string) error {
	var cs []string
	for _, a := range agents {
		c, err := p.names.AgentConsumer(a)
		if err != nil {
			return err
		}
		cs = append(cs, c)
	}
	p.mu.Lock()
	p.consumers = cs
	p.mu.Unlock()
	return nil
}

func newWorkerProbes(nc *nats.Conn, prefix string, agents []string) (*workerProbes, error) {
	names, err := bus.NewNames(prefix)
	if err != nil {
		return nil, fmt.Errorf("--prefix %q: %w", prefix, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	p := &workerProbes{nc: nc, js: js, stream: names.RunsStream(), names: names}
	return p, p.setAgents(agents)
}

// started marks the worker as claiming; stopping marks the ordered
// shutdown as begun (readiness fails from then on).
func (p *workerProbes) started()  { p.state.CompareAndSwap(probeStarting, probeReady) }
func (p *workerProbes) stopping() { p.state.Store(probeStopping) }

// probeStatus is the body of /healthz and /readyz.
type probeStatus struct {
	// Status is "ok" or "unavailable" (healthz: the connection is closed),
	// or "ready", "starting", "stopping", "unavailable" (readyz).
	Status string `json:"status"`
	// NATS is the connection's state: "connected", "reconnecting", ….
	NATS string `json:"nats"`
	// Error says why the worker is not ready.
	Error string `json:"error,omitempty"`
}

func (p *workerProbes) healthz(w http.ResponseWriter, _ *http.Request) {
	if p.nc.IsClosed() {
		writeProbe(w, http.StatusServiceUnavailable, probeStatus{Status: "unavailable", NATS: p.natsState(), Error: errClosed.Error()})
		return
	}
	writeProbe(w, http.StatusOK, probeStatus{Status: "ok", NATS: p.natsState()})
}

// errClosed is the reason a worker whose NATS connection closed is
// neither live nor ready.
var errClosed = errors.New("the NATS connection is closed and does not reconnect: restart the worker")

func (p *workerProbes) readyz(w http.ResponseWriter, r *http.Request) {
	st := probeStatus{Status: "ready", NATS: p.natsState()}
	code := http.StatusServiceUnavailable
	switch err := p.ready(r.Context()); {
	case err == nil:
		code = http.StatusOK
	case p.state.Load() == probeStarting:
		st.Status, st.Error = "starting", err.Error()
	case p.state.Load() == probeStopping:
		st.Status, st.Error = "stopping", err.Error()
	default:
		st.Status, st.Error = "unavailable", err.Error()
	}
	writeProbe(w, code, st)
}

// ready is nil when the worker is claiming, NATS is connected and the
// consumers of its agents on the runs stream answer.
func (p *workerProbes) ready(ctx context.Context) error {
	switch p.state.Load() {
	case probeStarting:
		return errors.New("the worker is provisioning the streams and has not started claiming")
	case probeStopping:
		return errors.New("the worker is shutting down: it claims no new runs")
	}
	if p.nc.IsClosed() {
		return errClosed
	}
	if !p.nc.IsConnected() {
		return fmt.Errorf("not connected to NATS (%s); the connection keeps retrying", p.natsState())
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	p.mu.Lock()
	consumers := p.consumers
	p.mu.Unlock()
	for _, c := range consumers {
		if _, err := p.js.Consumer(ctx, p.stream, c); err != nil {
			return fmt.Errorf("consumer %s on stream %s: %w", c, p.stream, err)
		}
	}
	return nil
}

func (p *workerProbes) natsState() string { return strings.ToLower(p.nc.Status().String()) }

func writeProbe(w http.ResponseWriter, code int, st probeStatus) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(st)
}

// serveMetrics serves /metrics and, with probes, /healthz and /readyz on
// addr ("" disables it) until stop is called. It returns the address it
// listens on.
func serveMetrics(addr string, g prometheus.Gatherer, probes *workerProbes, log *slog.Logger) (bound string, stop func(), err error) {
	if addr == "" {
		return "", func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("metrics listener %s: %w (use --metrics to pick another address)", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	if probes != nil {
		mux.HandleFunc("GET /healthz", probes.healthz)
		mux.HandleFunc("GET /readyz", probes.readyz)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics server stopped", "error", err)
		}
	}()
	return ln.Addr().String(), func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
	}, nil
}
