// Package fleettest starts fleets for tests: an embedded NATS server with
// JetStream, provisioned streams and buckets, workers, the API service and
// a client. Everything stops in t.Cleanup.
package fleettest

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/service"
	"github.com/lovia-fleet/lovia/pkg/store"
	"github.com/lovia-fleet/lovia/pkg/tools"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// Fleet is a running test fleet.
type Fleet struct {
	T         testing.TB
	Server    *broker.Embedded
	Conn      *nats.Conn
	JS        jetstream.JetStream
	Store     *store.Store
	Catalog   *catalog.Catalog
	Client    *client.Client
	API       *service.API
	Workspace string
	Workers   []*worker.Worker

	storeDir   string
	port       int
	maxPayload int32
}

// Options configures a Fleet.
type Options struct {
	// AgentsYAML is the agents file (default: the demo agent only).
	AgentsYAML string
	// Catalog, when set, is the fleet's agents instead of AgentsYAML's
	// (agents defined in Go: catalog.FromAgents).
	Catalog *catalog.Catalog
	// Workers is the number of workers (default 1; negative: none, for
	// tests that start them later with StartWorker).
	Workers int
	// Worker tweaks each worker's config.
	Worker func(*worker.Config)
	// API tweaks the API's config (the fleet's API service).
	API func(*service.Config)
	// Registry resolves models (default: empty; scripted agents need none).
	Registry *loop.Registry
	// MaxPayload is the server's max payload (default: the broker's).
	MaxPayload int32
}

// Start starts a fleet.
func Start(t testing.TB, o Options) *Fleet {
	t.Helper()
	f := &Fleet{T: t, Workspace: t.TempDir(), storeDir: t.TempDir(), maxPayload: o.MaxPayload}
	f.startServer()
	f.Conn = f.Connect()
	f.JS, _ = jetstream.New(f.Conn)
	ctx := context.Background()
	var err error
	if _, err = bus.Provision(ctx, f.JS, bus.ProvisionConfig{}); err != nil {
		t.Fatal(err)
	}
	if f.Store, err = store.Open(ctx, f.JS, store.Config{}); err != nil {
		t.Fatal(err)
	}
	ts, err := tools.Builtin(tools.Config{Workspace: f.Workspace})
	if err != nil {
		t.Fatal(err)
	}
	reg := o.Registry
	if reg == nil {
		reg = &loop.Registry{}
	}
	copts := catalog.Options{Tools: ts, Registry: reg}
	switch {
	case o.Catalog != nil:
		f.Catalog = o.Catalog
	case o.AgentsYAML != "":
		f.Catalog, err = catalog.Parse([]byte(o.AgentsYAML), copts)
	default:
		f.Catalog, err = catalog.Default(copts)
	}
	if err != nil {
		t.Fatal(err)
	}
	scfg := service.Config{Conn: f.Conn, Store: f.Store, Catalog: f.Catalog}
	if o.API != nil {
		o.API(&scfg)
	}
	if f.API, err = service.NewAPI(scfg); err != nil {
		t.Fatal(err)
	}
	svc := service.New(f.API)
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	if f.Client, err = client.New(f.Conn, client.Options{}); err != nil {
		t.Fatal(err)
	}
	n := o.Workers
	if n == 0 {
		n = 1
	}
	for i := 0; i < n; i++ {
		cfg := worker.Config{Conn: f.Connect(), Catalog: f.Catalog, Registry: reg, ID: "w" + string(rune('1'+i)), SkipProvision: true, Logger: testLogger(t)}
		if o.Worker != nil {
			o.Worker(&cfg)
		}
		f.StartWorker(cfg)
	}
	return f
}

// startServer starts the embedded server on the fleet's store directory and
// port (a free one the first time).
func (f *Fleet) startServer() {
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: f.storeDir, Port: f.port, MaxPayload: f.maxPayload})
	if err != nil {
		f.T.Fatal(err)
	}
	f.T.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	f.Server = srv
	f.port = srv.Server().Addr().(*net.TCPAddr).Port
}

// RestartServer shuts the NATS server down, waits down, and starts it again
// on the same port and store: the fleet's connections reconnect.
func (f *Fleet) RestartServer(down time.Duration) {
	f.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.Server.Shutdown(ctx); err != nil {
		f.T.Fatal(err)
	}
	time.Sleep(down)
	f.startServer()
}

// CrashServer stops the NATS server as a kill -9 would: the server it
// starts again, on the same port, after down, opens a copy of the store
// taken while the old one ran (what a crash leaves on disk, without the
// state files a clean shutdown writes); the fleet's connections reconnect.
func (f *Fleet) CrashServer(down time.Duration) {
	f.T.Helper()
	crashed := f.T.TempDir()
	if err := copyLive(crashed, f.storeDir); err != nil {
		f.T.Fatal(err)
	}
	f.storeDir = crashed // for the next server only: this one keeps its own
	f.RestartServer(down)
}

// copyLive copies the directory tree src, which a running server writes,
// to dst: a file that goes while it copies is skipped, as a crash would
// find it gone.
func copyLive(dst, src string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
}

// Connect opens a connection closed at cleanup. It reconnects for ever,
// quickly (see RestartServer).
func (f *Fleet) Connect() *nats.Conn {
	nc, err := nats.Connect(f.Server.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		f.T.Fatal(err)
	}
	f.T.Cleanup(nc.Close)
	return nc
}

// StartWorker starts one more worker.
func (f *Fleet) StartWorker(cfg worker.Config) *worker.Worker {
	w, err := worker.New(cfg)
	if err != nil {
		f.T.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		f.T.Fatal(err)
	}
	f.T.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	f.Workers = append(f.Workers, w)
	return w
}

// Events tails a run from its first event to its first terminal event.
func (f *Fleet) Events(runID string, timeout time.Duration) []*bus.Envelope {
	f.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tail, err := f.Client.Tail(ctx, runID, bus.FromStart())
	if err != nil {
		f.T.Fatal(err)
	}
	defer tail.Close(context.Background())
	var out []*bus.Envelope
	for env, err := range tail.All(ctx) {
		if err != nil {
			f.T.Fatalf("tail %s after %d events: %v", runID, len(out), err)
		}
		out = append(out, env)
	}
	return out
}

// OfType returns the envelopes of type typ.
func OfType(envs []*bus.Envelope, typ loop.EventType) []*bus.Envelope {
	var out []*bus.Envelope
	for _, e := range envs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// Event decodes an envelope's event as T, failing the test when it cannot.
func Event[T loop.Event](t testing.TB, env *bus.Envelope) T {
	t.Helper()
	ev, err := env.Event()
	if err != nil {
		t.Fatalf("event %d (%s): %v", env.Seq, env.Type, err)
	}
	out, ok := ev.(T)
	if !ok {
		t.Fatalf("event %s is %T", env.Type, ev)
	}
	return out
}

// Types lists the envelopes' types.
func Types(envs []*bus.Envelope) []string {
	out := make([]string, len(envs))
	for i, e := range envs {
		out[i] = string(e.Type)
	}
	return out
}

// testLogger logs to the test at debug level when LOVIA_TEST_LOG is set.
func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("LOVIA_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
