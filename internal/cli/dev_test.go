package cli

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
)

// lovia dev owns its embedded server: started on a store directory whose
// workers consumer allows fewer claims than its workers have slots (an
// older version's default), it raises the limit instead of keeping it.
func TestDevSizesTheClaimLimit(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: dir, Port: -1})
	require.NoError(t, err)
	nc, err := srv.Connect()
	require.NoError(t, err)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	pc := bus.ProvisionConfig{}
	pc.Workers.MaxAckPending = 1000
	_, err = bus.Provision(ctx, js, pc)
	require.NoError(t, err)
	require.NoError(t, bus.ProvisionAgents(ctx, js, pc, []string{"demo"}, false))
	nc.Close()
	require.NoError(t, srv.Shutdown(ctx))

	url := startDev(t, "--data", dir)
	nc, err = nats.Connect(url)
	require.NoError(t, err)
	defer nc.Close()
	js, err = jetstream.New(nc)
	require.NoError(t, err)
	cons, err := js.Consumer(ctx, "LOVIA_RUNS", "agent-demo")
	require.NoError(t, err)
	require.Equal(t, bus.DefaultWorkersAckPending, cons.CachedInfo().Config.MaxAckPending)
}
