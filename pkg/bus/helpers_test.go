package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
)

// testBundle is what most tests need: a server of their own, a connection
// and a JetStream context.
type testBundle struct {
	emb   *broker.Embedded
	nc    *nats.Conn
	js    jetstream.JetStream
	names bus.Names
}

// setup starts an embedded server for one test and tears it down after.
func setup(t *testing.T) *testBundle {
	t.Helper()
	emb, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	nc, err := emb.Connect()
	require.NoError(t, err)
	b := &testBundle{emb: emb, nc: nc}
	b.js = mustJS(t, b)
	t.Cleanup(func() {
		nc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, emb.Shutdown(ctx))
	})
	return b
}

func mustJS(t testing.TB, b *testBundle) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(b.nc)
	require.NoError(t, err)
	return js
}

// provisioned is setup plus Provision with defaults.
func provisioned(t *testing.T) *testBundle {
	t.Helper()
	b := setup(t)
	_, err := bus.Provision(ctxT(t), b.js, bus.ProvisionConfig{})
	require.NoError(t, err)
	return b
}

// ctxT is a context that ends with the test, or after 20s.
func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
