package broker_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// TestClusterFailover publishes a run's events to an R3 stream, kills the
// stream leader mid-run, and checks that publishing goes on and a tail
// reads every seq once, in order.
func TestClusterFailover(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	start := time.Now()
	c, err := broker.StartCluster(broker.ClusterConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Logf("cluster ready in %s", time.Since(start))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		require.NoError(t, c.Shutdown(ctx))
	})
	require.Equal(t, 3, c.Size())
	require.Len(t, c.URLs(), 3)

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	nc, err := nats.Connect(c.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)

	_, err = bus.Provision(ctx, js, bus.ProvisionConfig{Replicas: 3, SkipWorkers: true})
	require.NoError(t, err)
	rep, err := bus.Provision(ctx, js, bus.ProvisionConfig{Replicas: 3, SkipWorkers: true})
	require.NoError(t, err)
	require.Empty(t, rep.Updated, "idempotent on a cluster too")
	// A process that does not ask for a replica count (a gateway, a worker
	// without --replicas) leaves the R3 streams alone.
	rep, err = bus.Provision(ctx, js, bus.ProvisionConfig{SkipWorkers: true})
	require.NoError(t, err)
	require.Empty(t, rep.Updated, "an unset replica count shrank streams")
	s, err := js.Stream(ctx, "LOVIA_EVENTS")
	require.NoError(t, err)
	require.Equal(t, 3, s.CachedInfo().Config.Replicas)

	pub, err := bus.NewPublisher(js, bus.PublisherConfig{AckTimeout: 2 * time.Second, RetryAttempts: 20, RetryWait: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	require.NoError(t, err)
	rp, err := pub.Open(ctx, "fo-1", bus.Msgpack)
	require.NoError(t, err)
	publish := func(n int) {
		for range n {
			_, err := rp.Publish(ctx, &loop.TextDelta{EventHeader: loop.EventHeader{Agent: "demo", Turn: 1}, Delta: "x"})
			require.NoError(t, err)
		}
		require.NoError(t, rp.Flush(ctx))
	}
	publish(50)

	leader := c.StreamLeader("LOVIA_EVENTS")
	require.GreaterOrEqual(t, leader, 0)
	require.NoError(t, c.Kill(ctx, leader))
	require.Nil(t, c.Node(leader))
	killed := time.Now()

	publish(50) // through the election
	t.Logf("50 events published and flushed %s after the stream leader died", time.Since(killed))
	_, err = rp.Publish(ctx, &loop.RunCompleted{Output: "ok"})
	require.NoError(t, err)
	require.NoError(t, rp.Flush(ctx))

	last, err := pub.LastSeq(ctx, "fo-1")
	require.NoError(t, err)
	require.Equal(t, uint64(101), last)

	restarted := time.Now()
	require.NoError(t, c.Restart(leader))
	require.NoError(t, c.WaitReady(ctx))
	t.Logf("node %d back and healthy in %s", leader, time.Since(restarted))
	require.NotNil(t, c.Node(leader))

	tailer, err := bus.NewTailer(js, bus.TailerConfig{})
	require.NoError(t, err)
	tl, err := tailer.Tail(ctx, "fo-1")
	require.NoError(t, err)
	defer tl.Close(context.Background())
	var seqs []uint64
	for env, err := range tl.All(ctx) {
		require.NoError(t, err)
		seqs = append(seqs, env.Seq)
	}
	want := make([]uint64, 101)
	for i := range want {
		want[i] = uint64(i + 1)
	}
	require.Equal(t, want, seqs)
}

func TestClusterConfigValidate(t *testing.T) {
	t.Parallel()
	_, err := broker.StartCluster(broker.ClusterConfig{})
	require.ErrorIs(t, err, broker.ErrInvalidConfig)
	require.Contains(t, err.Error(), "StoreDir")
	_, err = broker.StartCluster(broker.ClusterConfig{StoreDir: t.TempDir(), Nodes: 12})
	require.ErrorContains(t, err, "Nodes")
}
