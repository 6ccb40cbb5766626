package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

func TestEmbedded(t *testing.T) {
	t.Parallel()

	t.Run("listens on a random port", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		url := b.emb.ClientURL()
		require.Contains(t, url, "nats://127.0.0.1:")
		nc, err := nats.Connect(url)
		require.NoError(t, err)
		defer nc.Close()
		require.True(t, nc.IsConnected())
	})

	t.Run("in-process only", func(t *testing.T) {
		t.Parallel()
		emb, err := bus.StartEmbedded(bus.EmbeddedConfig{StoreDir: t.TempDir(), Port: -1})
		require.NoError(t, err)
		defer emb.Shutdown(context.Background())
		nc, err := emb.Connect()
		require.NoError(t, err)
		defer nc.Close()
		require.True(t, nc.IsConnected())
	})

	t.Run("config is checked", func(t *testing.T) {
		t.Parallel()
		_, err := bus.StartEmbedded(bus.EmbeddedConfig{})
		require.ErrorIs(t, err, bus.ErrInvalidConfig)
		require.ErrorContains(t, err, "StoreDir")
		_, err = bus.StartEmbedded(bus.EmbeddedConfig{StoreDir: t.TempDir(), Port: -1, ClusterName: "c"})
		require.ErrorContains(t, err, "Port")
		d := bus.EmbeddedConfig{}.WithDefaults()
		require.Equal(t, "127.0.0.1", d.Host)
		require.Equal(t, 10*time.Second, d.ReadyTimeout)
	})
}
