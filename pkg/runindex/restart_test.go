package runindex_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/lifecycle"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// A NATS restart does not end the listing: the index keeps serving what
// it holds while the server is away, and runs stored after the restart
// appear in it — within seconds, as the feed loads the index again when
// its connection reconnects (the watch alone took about 20 s to recover).
func TestFeedAcrossServerRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	start := func(port int) *broker.Embedded {
		emb, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: dir, Port: port})
		require.NoError(t, err)
		return emb
	}
	emb := start(0)
	port := emb.Server().Addr().(*net.TCPAddr).Port
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = emb.Shutdown(sctx)
	})
	nc, err := nats.Connect(emb.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	require.NoError(t, store.EnsureBuckets(ctx, js, store.Config{}))
	st, err := store.Open(ctx, js, store.Config{})
	require.NoError(t, err)
	_, err = st.Runs().Create(ctx, lifecycle.Submit(lifecycle.Submission{RunID: "before", Agent: "a"}))
	require.NoError(t, err)
	f := startFeed(t, st, nc)
	x, err := f.Index(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, x.Len())

	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	require.NoError(t, emb.Shutdown(sctx))
	cancel()
	x, err = f.Index(ctx)
	require.NoError(t, err)
	_, ok := x.Get("before", time.Now())
	require.True(t, ok, "the index answers while the server is away")
	emb = start(port)

	restarted := time.Now()
	defer func() { t.Logf("indexed %v after the restart", time.Since(restarted)) }()
	eventually(t, "a run stored after the restart to be indexed", func() bool {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := st.Runs().Create(cctx, lifecycle.Submit(lifecycle.Submission{RunID: "after", Agent: "a"}))
		if err != nil && !errorsIsExists(err) {
			return false
		}
		x, err := f.Index(ctx)
		if err != nil {
			return false
		}
		_, ok := x.Get("after", time.Now())
		return ok
	})
	require.GreaterOrEqual(t, f.Loads(), 2, "the feed loads the index again after its connection reconnects")
}

func errorsIsExists(err error) bool { return errors.Is(err, store.ErrRunExists) }
