package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/broker"
)

func TestEmbedded(t *testing.T) {
	t.Parallel()

	t.Run("listens on a random port", func(t *testing.T) {
		t.Parallel()
		emb, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir()})
		require.NoError(t, err)
		defer emb.Shutdown(context.Background())
		url := emb.ClientURL()
		require.Contains(t, url, "nats://127.0.0.1:")
		nc, err := nats.Connect(url)
		require.NoError(t, err)
		defer nc.Close()
		require.True(t, nc.IsConnected())
	})

	t.Run("in-process only", func(t *testing.T) {
		t.Parallel()
		emb, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir(), Port: -1})
		require.NoError(t, err)
		defer emb.Shutdown(context.Background())
		nc, err := emb.Connect()
		require.NoError(t, err)
		defer nc.Close()
		require.True(t, nc.IsConnected())
	})

	t.Run("config is checked", func(t *testing.T) {
		t.Parallel()
		_, err := broker.StartEmbedded(broker.EmbeddedConfig{})
		require.ErrorIs(t, err, broker.ErrInvalidConfig)
		require.ErrorContains(t, err, "StoreDir")
		_, err = broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir(), Port: -1, ClusterName: "c"})
		require.ErrorContains(t, err, "Port")
		d := broker.EmbeddedConfig{}.WithDefaults()
		require.Equal(t, "127.0.0.1", d.Host)
		require.Equal(t, 10*time.Second, d.ReadyTimeout)
	})
}
