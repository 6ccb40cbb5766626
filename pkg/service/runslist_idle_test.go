package service

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/lifecycle"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// An API whose run index nobody has used for the idle limit stops
// following the bucket (a worker that answered one listing does not watch
// every run for ever); the next listing loads it again, and Service.Stop
// stops it for good.
func TestRunIndexStopsWhenIdle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	api := oneRunAPI(t)
	api.index.idleAfter = 300 * time.Millisecond
	svc := New(api)
	require.NoError(t, svc.Start(ctx))

	running := func() bool {
		api.index.mu.Lock()
		defer api.index.mu.Unlock()
		return api.index.feed != nil
	}
	list := func() {
		t.Helper()
		rep, err := api.ListRuns(ctx, &bus.RunsListRequest{})
		require.NoError(t, err)
		require.Len(t, rep.Runs, 1)
	}
	list()
	require.True(t, running())
	deadline := time.Now().Add(30 * time.Second)
	for running() {
		require.True(t, time.Now().Before(deadline), "waiting for the idle run index to stop")
		time.Sleep(20 * time.Millisecond)
	}
	list() // loads it again
	require.True(t, running())
	require.NoError(t, svc.Stop(ctx))
	require.False(t, running())
	_, err := api.ListRuns(ctx, &bus.RunsListRequest{})
	require.ErrorContains(t, err, "stopping")
}

// TestWarmRunIndexStaysLive: the index a gateway warms at start is not
// stopped when idle (the console and the run metrics read it), only with
// the service.
func TestWarmRunIndexStaysLive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	api := oneRunAPI(t)
	svc := New(api)
	require.NoError(t, svc.Start(ctx))
	require.NoError(t, api.WarmRunIndex(ctx))

	deadline := time.Now().Add(30 * time.Second)
	for {
		counts, _, ok := api.RunCounts()
		if ok && counts[store.RunQueued] == 1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "waiting for the warmed index to count the queued run: %v", counts)
		time.Sleep(20 * time.Millisecond)
	}
	api.index.mu.Lock()
	api.index.used = time.Now().Add(-time.Hour) // idle for an hour
	api.index.mu.Unlock()
	api.idleIndex()
	api.index.mu.Lock()
	live := api.index.feed != nil
	api.index.mu.Unlock()
	require.True(t, live, "the warmed index stopped when idle")
	require.NoError(t, svc.Stop(ctx))
	_, _, ok := api.RunCounts()
	require.False(t, ok, "the index outlived the service")
}

// oneRunAPI returns an API (not serving) on a fresh server whose run
// index holds one queued run, r1.
func oneRunAPI(t *testing.T) *API {
	t.Helper()
	ctx := context.Background()
	nc, _, st := provisioned(t, store.Config{})
	_, err := st.Runs().Create(ctx, lifecycle.Submit(lifecycle.Submission{RunID: "r1", Agent: "a"}))
	require.NoError(t, err)
	api, err := NewAPI(Config{Conn: nc, Store: st})
	require.NoError(t, err)
	return api
}

// provisioned starts an embedded server, provisions its streams and
// buckets and opens a store with cfg on them.
func provisioned(t *testing.T, cfg store.Config) (*nats.Conn, jetstream.JetStream, *store.Store) {
	t.Helper()
	ctx := context.Background()
	emb, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir(), Port: -1})
	require.NoError(t, err)
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = emb.Shutdown(sctx)
	})
	nc, err := emb.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = bus.Provision(ctx, js, bus.ProvisionConfig{})
	require.NoError(t, err)
	st, err := store.Open(ctx, js, cfg)
	require.NoError(t, err)
	return nc, js, st
}
