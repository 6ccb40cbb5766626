package cli

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
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

// A second lovia dev on a taken NATS port or HTTP address says so before
// it starts anything (the embedded server said it only after its
// ten-second ready timeout), naming the flag that picks another.
func TestDevRefusesATakenPort(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nats-port", strconv.Itoa(port), "--http", "127.0.0.1:0"}, fmt.Sprintf("NATS port %d is already in use", port)},
		{[]string{"--nats-port", "0", "--http", l.Addr().String()}, fmt.Sprintf("HTTP address %s is already in use", l.Addr())},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"dev", "--data", t.TempDir(), "--workspace", t.TempDir(), "--log-level", "warn"}, tc.args...)
		code := Main(context.Background(), args, strings.NewReader(""), &out, &errb, getenv(nil))
		require.Equal(t, ExitFailure, code, "%s %s", out.String(), errb.String())
		require.Contains(t, errb.String(), tc.want)
		require.NotContains(t, out.String(), "lovia dev is up")
	}
}
