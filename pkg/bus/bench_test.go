package bus_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// BenchmarkPublish measures one run's event rate: async publish with the
// default MaxPending and a flush at the end, on an embedded server.
func BenchmarkPublish(b *testing.B) {
	for _, enc := range encodings {
		b.Run(string(enc), func(b *testing.B) {
			tb := provisionedB(b)
			pub, err := bus.NewPublisher(tb.js, bus.PublisherConfig{})
			require.NoError(b, err)
			ctx := context.Background()
			rp, err := pub.Open(ctx, "bench-"+string(enc), enc)
			require.NoError(b, err)
			ev := &loop.TextDelta{EventHeader: hdr("demo", 3), Delta: "a token or two "}
			start := time.Now()
			for b.Loop() {
				if _, err := rp.Publish(ctx, ev); err != nil {
					b.Fatal(err)
				}
			}
			require.NoError(b, rp.Flush(ctx))
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
		})
	}
}

// BenchmarkTail measures reading a stored run from the start.
func BenchmarkTail(b *testing.B) {
	tb := provisionedB(b)
	pub, err := bus.NewPublisher(tb.js, bus.PublisherConfig{})
	require.NoError(b, err)
	tailer, err := bus.NewTailer(tb.js, bus.TailerConfig{Buffer: 256})
	require.NoError(b, err)
	ctx := context.Background()
	const n = 2000
	rp, err := pub.Open(ctx, "bench-tail", bus.Msgpack)
	require.NoError(b, err)
	for i := range n - 1 {
		_, err := rp.Publish(ctx, delta(strconv.Itoa(i)))
		require.NoError(b, err)
	}
	_, err = rp.Publish(ctx, &loop.RunCompleted{Output: "ok"})
	require.NoError(b, err)
	require.NoError(b, rp.Flush(ctx))
	start := time.Now()
	for b.Loop() {
		tl, err := tailer.Tail(ctx, "bench-tail")
		require.NoError(b, err)
		got := 0
		for _, err := range tl.All(ctx) {
			require.NoError(b, err)
			got++
		}
		require.Equal(b, n, got)
		require.NoError(b, tl.Close(ctx))
	}
	b.ReportMetric(float64(b.N*n)/time.Since(start).Seconds(), "events/s")
}

func provisionedB(b *testing.B) *testBundle {
	b.Helper()
	emb, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: b.TempDir(), Port: -1})
	require.NoError(b, err)
	nc, err := emb.Connect()
	require.NoError(b, err)
	tb := &testBundle{emb: emb, nc: nc}
	b.Cleanup(func() {
		nc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = emb.Shutdown(ctx)
	})
	tb.js = mustJS(b, tb)
	_, err = bus.Provision(context.Background(), tb.js, bus.ProvisionConfig{})
	require.NoError(b, err)
	return tb
}
