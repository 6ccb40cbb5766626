package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/tools"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// TestStopAfterAFailedStart (lifecycle hygiene): a Start that fails part
// way — here at binding the consumers of its agents, because the streams
// were never provisioned and the worker was told not to provision them —
// leaves nothing behind: Stop after it returns nil without a panic, the
// connection holds no subscription of the worker's, and the package's
// goleak check finds no goroutine it started (TestMain). Stop twice is
// fine too, and so is Stop without Start.
func TestStopAfterAFailedStart(t *testing.T) {
	t.Parallel()
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	nc, err := srv.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	ts, err := tools.Builtin(tools.Config{Workspace: t.TempDir()})
	require.NoError(t, err)
	cat, err := catalog.Parse([]byte(agents), catalog.Options{Tools: ts})
	require.NoError(t, err)
	ctx := context.Background()

	never, err := worker.New(worker.Config{Conn: nc, Catalog: cat, ID: "never"})
	require.NoError(t, err)
	require.NoError(t, never.Stop(ctx), "Stop without Start")

	// The connection's own reply subscription (made at its first request)
	// is not the worker's: count from after it.
	_, _ = nc.Request("$JS.API.INFO", nil, time.Second)
	base := nc.NumSubscriptions()
	w, err := worker.New(worker.Config{Conn: nc, Catalog: cat, ID: "partial", SkipProvision: true})
	require.NoError(t, err)
	require.Error(t, w.Start(ctx), "Start binds streams that do not exist")
	require.NoError(t, w.Stop(ctx))
	require.NoError(t, w.Stop(ctx))
	require.Equal(t, base, nc.NumSubscriptions(), "a failed Start left subscriptions on the connection")
}

// TestStopAfterAStartThatFailedLate: the same when Start fails after it
// has subscribed to control notifications, started the dead-letter loop,
// the takeover reaper, the park timers and the sweep (here at binding the
// fleet registry, whose stream name another stream holds): Stop tears
// each of them down, and the connection is left with the subscriptions it
// had before Start.
func TestStopAfterAStartThatFailedLate(t *testing.T) {
	t.Parallel()
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	nc, err := srv.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	ts, err := tools.Builtin(tools.Config{Workspace: t.TempDir()})
	require.NoError(t, err)
	cat, err := catalog.Parse([]byte(agents), catalog.Options{Tools: ts})
	require.NoError(t, err)
	ctx := context.Background()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "KV_lovia_fleet", Subjects: []string{"elsewhere.>"}})
	require.NoError(t, err)
	base := nc.NumSubscriptions()

	w, err := worker.New(worker.Config{Conn: nc, Catalog: cat, ID: "late"})
	require.NoError(t, err)
	err = w.Start(ctx)
	require.ErrorContains(t, err, "fleet")
	require.NoError(t, w.Stop(ctx))
	require.Eventually(t, func() bool { return nc.NumSubscriptions() == base }, 5*time.Second, 10*time.Millisecond,
		"Stop after a failed Start left %d subscriptions (had %d before Start)", nc.NumSubscriptions(), base)
}
