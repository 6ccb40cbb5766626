package cli

import (
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"
)

// freePort returns a TCP port nothing listens on (for now).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port
}

// asyncCommand is `lovia ARGS` running in this process.
type asyncCommand struct {
	stderr *syncBuf
	done   chan struct{} // closed when Main returned
	code   int           // Main's exit status, once done
}

// startCommandAsync runs `lovia ARGS` in this process until ctx ends; it
// is interrupted (and waited for) at cleanup.
func startCommandAsync(t *testing.T, ctx context.Context, args ...string) *asyncCommand {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	c := &asyncCommand{stderr: &syncBuf{}, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.code = Main(ctx, args, strings.NewReader(""), io.Discard, c.stderr, getenv(nil))
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-c.done:
		case <-time.After(WorkerStopTimeout + 10*time.Second):
			t.Errorf("lovia %s did not stop:\n%s", args[0], c.stderr)
		}
	})
	return c
}

// waitOutput waits until the command's stderr contains want.
func (c *asyncCommand) waitOutput(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(c.stderr.String(), want) {
		select {
		case <-c.done:
			t.Fatalf("the command exited with %d before it said %q:\n%s", c.code, want, c.stderr)
		case <-time.After(20 * time.Millisecond):
		}
		require.True(t, time.Now().Before(deadline), "waited 60s for the command to say %q:\n%s", want, c.stderr)
	}
}

// exit waits for the command to exit and returns its status.
func (c *asyncCommand) exit(t *testing.T) int {
	t.Helper()
	select {
	case <-c.done:
		return c.code
	case <-time.After(60 * time.Second):
		t.Fatalf("waited 60s for the command to exit:\n%s", c.stderr)
		return -1
	}
}

// A worker and a gateway started before NATS wait for it, saying so, and
// start once it listens; past --nats-wait, or on Ctrl-C, they exit with a
// clear error.
func TestStartupWaitsForNATS(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	waiting := "waiting for NATS at " + url + ", retrying"

	w := startCommandAsync(t, t.Context(), "worker", "--nats", url, "--workspace", t.TempDir())
	g := startCommandAsync(t, t.Context(), "gateway", "--nats", url, "--http", "127.0.0.1:0")
	w.waitOutput(t, waiting)
	g.waitOutput(t, waiting)

	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	require.NoError(t, err)
	s.Start()
	require.True(t, s.ReadyForConnections(10*time.Second), "nats-server not ready for connections")
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	w.waitOutput(t, "serving agents demo")
	g.waitOutput(t, "lovia gateway on http://")
	require.Contains(t, w.stderr.String(), "connected to NATS")

	t.Run("gives up after --nats-wait", func(t *testing.T) {
		t.Parallel()
		url := "nats://127.0.0.1:" + strconv.Itoa(freePort(t))
		for _, cmd := range [][]string{
			{"worker", "--nats", url, "--nats-wait", "1s", "--workspace", t.TempDir()},
			{"gateway", "--nats", url, "--nats-wait", "1s", "--http", "127.0.0.1:0"},
		} {
			c := startCommandAsync(t, t.Context(), cmd...)
			require.Equal(t, ExitFailure, c.exit(t), c.stderr.String())
			require.Contains(t, c.stderr.String(), "no NATS server accepted a connection at "+url+" within --nats-wait 1s", cmd[0])
			require.Contains(t, c.stderr.String(), "start NATS, or pass --nats / set NATS_URL", cmd[0])
		}
	})

	t.Run("Ctrl-C ends the wait", func(t *testing.T) {
		t.Parallel()
		url := "nats://127.0.0.1:" + strconv.Itoa(freePort(t))
		ctx, cancel := context.WithCancel(t.Context())
		c := startCommandAsync(t, ctx, "worker", "--nats", url, "--workspace", t.TempDir())
		c.waitOutput(t, "waiting for NATS at "+url)
		cancel()
		require.Equal(t, ExitFailure, c.exit(t), c.stderr.String())
		require.Contains(t, c.stderr.String(), "stopped while waiting for NATS at "+url)
	})

	t.Run("a refused login fails at once", func(t *testing.T) {
		t.Parallel()
		srv := startPasswordServer(t, "right")
		c := startCommandAsync(t, t.Context(), "worker", "--nats", srv.url("wrong"), "--workspace", t.TempDir())
		require.Equal(t, ExitFailure, c.exit(t), c.stderr.String())
		require.Contains(t, c.stderr.String(), "the server refused these credentials")
		require.NotContains(t, c.stderr.String(), "waiting for NATS")
	})

	t.Run("a bad --nats-wait is a usage error", func(t *testing.T) {
		t.Parallel()
		for value, want := range map[string]string{"-1s": "-1s is negative: give 0", "soon": `"soon" is not a duration`} {
			code, _, errs := runCLI(t, getenv(nil), "worker", "--nats-wait", value)
			require.Equal(t, ExitUsage, code, errs)
			require.Contains(t, errs, "invalid value \""+value+"\" for flag -nats-wait: "+want)
		}
	})
}
