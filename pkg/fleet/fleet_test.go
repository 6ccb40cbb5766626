package fleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/leaktest"
	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/fleet"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

// setup starts an embedded NATS server (stopped at cleanup) and returns
// the fleet registry on it.
func setup(t *testing.T) *fleet.Registry {
	t.Helper()
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	nc, err := srv.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	reg, err := fleet.Ensure(context.Background(), js, bus.Names{}, 1)
	require.NoError(t, err)
	return reg
}

func TestFleet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := setup(t)

	view := fleet.NewView(reg, time.Hour) // a cache that never expires by itself
	ok, live, err := view.Serves(ctx, "support")
	require.NoError(t, err)
	require.False(t, ok)
	require.Empty(t, live)

	a := fleet.NewAnnouncer(reg, fleet.Member{Worker: "w1", Agents: []bus.AgentInfo{{Name: "support"}}}, 50*time.Millisecond, nil)
	require.NoError(t, a.Start(ctx))
	ok, _, err = view.Serves(ctx, "support")
	require.NoError(t, err)
	require.True(t, ok, "a refusal reads the registry again: a worker that just started is seen at once")
	ok, live, err = view.Serves(ctx, "billing")
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, []string{"support"}, live)

	a.Update(fleet.Member{Worker: "w1", Agents: []bus.AgentInfo{{Name: "support"}, {Name: "billing"}}})
	ok, _, err = view.Serves(ctx, "billing")
	require.NoError(t, err)
	require.True(t, ok, "an updated announcement names the new agent")

	require.NoError(t, a.Stop(ctx))
	require.NoError(t, a.Stop(ctx), "Stop twice")
	ms, err := reg.Members(ctx)
	require.NoError(t, err)
	require.Empty(t, ms, "a stopped worker withdrew its announcement")
}
