package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// lovia dev stops its workers before it closes their NATS connections: a
// run in flight when dev is told to stop finishes within the workers'
// shutdown grace and is acknowledged — its run_completed is stored and the
// work queue is empty when the store directory is opened again. (With the
// connections closed first, the run's last events and its ack were lost.)
func TestDevStopsWorkersBeforeTheirConnections(t *testing.T) {
	dir, work := t.TempDir(), t.TempDir()
	agents := filepath.Join(t.TempDir(), "agents.yaml")
	require.NoError(t, os.WriteFile(agents, []byte(`
agents:
  - name: napper
    model: scripted
    tools: [sleep]
    script:
      - call: {name: sleep, args: {ms: 1500}, id: s1}
      - text: rested
`), 0o644))
	ctx, cancel := context.WithCancel(context.Background())
	out, errb := &syncBuf{}, &syncBuf{}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"dev", "--nats-port", "0", "--http", "127.0.0.1:0", "--data", dir, "--workspace", work,
			"--agents", agents, "--workers", "1", "--log-level", "warn"}, strings.NewReader(""), out, errb, getenv(nil))
	}()
	var url string
	require.Eventually(t, func() bool {
		for _, f := range strings.Fields(out.String()) {
			if strings.HasPrefix(f, "nats://") {
				url = f
				return true
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond, "dev never came up: %s", errb.String())
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	c, err := client.New(nc, client.Options{})
	require.NoError(t, err)
	rep, err := c.Submit(context.Background(), &bus.RunRequest{Agent: "napper", Input: bus.TextInput("nap")})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := c.Status(context.Background(), rep.RunID)
		return err == nil && st.Status == bus.StateRunning
	}, 10*time.Second, 10*time.Millisecond, "the run never started")
	nc.Close()
	cancel()
	select {
	case code := <-done:
		require.Equal(t, ExitOK, code, errb.String())
	case <-time.After(40 * time.Second):
		t.Fatal("lovia dev did not stop")
	}
	require.NotContains(t, errb.String(), "connection closed", "a worker used its connection after it was closed")

	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: dir, Port: -1})
	require.NoError(t, err)
	defer func() { _ = srv.Shutdown(context.Background()) }()
	nc2, err := srv.Connect()
	require.NoError(t, err)
	defer nc2.Close()
	js, err := jetstream.New(nc2)
	require.NoError(t, err)
	runs, err := js.Stream(context.Background(), "LOVIA_RUNS")
	require.NoError(t, err)
	info, err := runs.Info(context.Background())
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs, "the run's request was not acknowledged before dev stopped")
	events, err := js.Stream(context.Background(), "LOVIA_EVENTS")
	require.NoError(t, err)
	last, err := events.GetLastMsgForSubject(context.Background(), "lovia.events."+rep.RunID)
	require.NoError(t, err)
	env, err := bus.DecodeEnvelope(last.Header, last.Data)
	require.NoError(t, err)
	require.Equal(t, loop.EventRunCompleted, env.Type, "the run's last stored event")
}
