package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParseFlags(t *testing.T) {
	t.Parallel()
	t.Run("Defaults", func(t *testing.T) {
		o, err := parseFlags(nil, env(nil), io.Discard)
		require.NoError(t, err)
		require.Equal(t, options{nats: "nats://127.0.0.1:4222", http: ":8080", prefix: "lovia"}, o)
	})
	t.Run("Environment", func(t *testing.T) {
		o, err := parseFlags([]string{"--token", "a"}, env(map[string]string{"NATS_URL": "nats://n:4222", "LOVIA_TOKENS": " b, ,c "}), io.Discard)
		require.NoError(t, err)
		require.Equal(t, "nats://n:4222", o.nats)
		require.Equal(t, []string{"a", "b", "c"}, o.tokens)
	})
	t.Run("FlagsWin", func(t *testing.T) {
		o, err := parseFlags([]string{"--nats", "nats://x:1", "--http", "127.0.0.1:0", "--prefix", "p", "--agents", "a.yaml"},
			env(map[string]string{"NATS_URL": "nats://n:4222"}), io.Discard)
		require.NoError(t, err)
		require.Equal(t, options{nats: "nats://x:1", http: "127.0.0.1:0", prefix: "p", agents: "a.yaml"}, o)
	})
	t.Run("BadUsage", func(t *testing.T) {
		for _, args := range [][]string{{"--nope"}, {"extra"}, {"--token", ""}} {
			require.Equal(t, exitUsage, run(context.Background(), args, env(nil), io.Discard), args)
		}
		require.Equal(t, exitOK, run(context.Background(), []string{"-h"}, env(nil), io.Discard))
	})
}

func TestRunServesUntilCancelled(t *testing.T) {
	t.Parallel()
	srv, err := bus.StartEmbedded(bus.EmbeddedConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	agents := filepath.Join(t.TempDir(), "agents.yaml")
	require.NoError(t, os.WriteFile(agents, []byte("agents:\n  - {name: oracle, model: scripted, script: [{text: hi}]}\n"), 0o600))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--nats", srv.ClientURL(), "--http", "127.0.0.1:0", "--agents", agents}, env(map[string]string{"LOVIA_TOKENS": "t"}), &logs)
	}()

	addr := regexp.MustCompile(`gateway listening"? addr=(\S+)`)
	var base string
	require.Eventually(t, func() bool {
		m := addr.FindStringSubmatch(logs.String())
		if m != nil {
			base = "http://" + m[1]
		}
		return m != nil
	}, 10*time.Second, 10*time.Millisecond, "no listening line in %s", &logs)

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	resp, err := hc.Get(base + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	req, _ := http.NewRequest(http.MethodGet, base+"/v1/agents", nil)
	req.Header.Set("Authorization", "Bearer t")
	resp, err = hc.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), `"name":"oracle"`)

	cancel()
	select {
	case code := <-done:
		require.Equal(t, exitOK, code, logs.String())
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return after cancel")
	}
	require.Contains(t, logs.String(), "gateway stopped")
}

func TestRunFailsWithoutNATS(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	code := run(context.Background(), []string{"--nats", "nats://127.0.0.1:1", "--http", "127.0.0.1:0"}, env(nil), &logs)
	require.Equal(t, exitFailure, code)
	require.Contains(t, logs.String(), "connect to NATS")
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
