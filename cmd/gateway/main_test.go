package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/cli"
	"github.com/lovia-fleet/lovia/internal/leaktest"
	"github.com/lovia-fleet/lovia/pkg/broker"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestBadUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--nope"}, {"--http"}} {
		require.Equal(t, cli.ExitUsage, run(context.Background(), args, strings.NewReader(""), io.Discard, io.Discard, env(nil)), args)
	}
}

func TestRunServesUntilCancelled(t *testing.T) {
	t.Parallel()
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	agents := filepath.Join(t.TempDir(), "agents.yaml")
	require.NoError(t, os.WriteFile(agents, []byte("agents:\n  - {name: oracle, model: scripted, script: [{text: hi}]}\n"), 0o600))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs syncBuffer
	done := make(chan int, 1)
	go func() {
		args := []string{"--nats", srv.ClientURL(), "--http", "127.0.0.1:0", "--agents", agents}
		done <- run(ctx, args, strings.NewReader(""), io.Discard, &logs, env(map[string]string{"LOVIA_TOKENS": "t"}))
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

	resp, err = hc.Get(base + "/v1/agents")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "LOVIA_TOKENS configures the tokens")

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
		require.Equal(t, cli.ExitOK, code, logs.String())
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return after cancel")
	}
	require.Contains(t, logs.String(), "gateway stopped")
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
