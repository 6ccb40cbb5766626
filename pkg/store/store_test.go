package store

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/lovia-fleet/lovia/pkg/broker"
)

// The object store publishes asynchronously; nats.go v1.55.0 can leave its
// reconnect watcher blocked on a nil channel after the connection closed
// (a library race, not ours).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"))
}

// server is one embedded NATS server for one test.
type server struct {
	emb *broker.Embedded
	cfg Config
}

// startServer starts an embedded JetStream server (random port, StoreDir in
// t.TempDir) with the buckets of cfg, and shuts it down in t.Cleanup.
func startServer(t testing.TB, cfg Config) *server {
	t.Helper()
	emb, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, emb.Shutdown(ctx))
	})
	s := &server{emb: emb, cfg: cfg}
	js := s.connect(t)
	require.NoError(t, EnsureBuckets(t.Context(), js, cfg))
	return s
}

// connect opens a client connection that is closed in t.Cleanup.
func (s *server) connect(t testing.TB) jetstream.JetStream {
	t.Helper()
	nc, err := s.emb.Connect(nats.Name(t.Name()))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}

// open opens a Store over a new connection.
func (s *server) open(t testing.TB) *Store {
	t.Helper()
	st, err := Open(t.Context(), s.connect(t), s.cfg)
	require.NoError(t, err)
	return st
}

// newStore starts a server and opens a store on it.
func newStore(t testing.TB, cfg Config) (*server, *Store) {
	t.Helper()
	s := startServer(t, cfg)
	return s, s.open(t)
}

// keys lists the keys of a bucket that match filter.
func keys(t testing.TB, st *Store, b *bucket, filter string) []string {
	t.Helper()
	entries, err := b.list(t.Context(), filter)
	require.NoError(t, err)
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Key()
	}
	return out
}
