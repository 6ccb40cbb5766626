package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startAccountsServer starts a JetStream server with two accounts, A and
// B, each with one user (a/pa, b/pb); it returns a user's URL.
func startAccountsServer(t *testing.T) func(user, password string) string {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "accounts.conf")
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(`
listen: 127.0.0.1:-1
jetstream: {store_dir: %q}
accounts: {
  A: {jetstream: enabled, users: [{user: a, password: pa}]}
  B: {jetstream: enabled, users: [{user: b, password: pb}]}
}
`, t.TempDir())), 0o600))
	opts, err := server.ProcessConfigFile(conf)
	require.NoError(t, err)
	opts.NoLog, opts.NoSigs = true, true
	s, err := server.NewServer(opts)
	require.NoError(t, err)
	s.Start()
	require.True(t, s.ReadyForConnections(10*time.Second), "nats-server not ready for connections")
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return func(user, password string) string {
		return (&url.URL{Scheme: "nats", User: url.UserPassword(user, password), Host: s.Addr().String()}).String()
	}
}

// Each tenant of `lovia gateway --tenants` has its own agents file: a
// tenant's token lists and submits to its own agents only, never another
// tenant's (their instructions are not shown to it, a run for them is
// UnknownAgent, not accepted to wait for ever). One --agents for every
// tenant is refused. A tenant whose NATS is not there does not keep the
// gateway from serving the others.
func TestTenantsEachHaveTheirAgents(t *testing.T) {
	t.Parallel()
	userURL := startAccountsServer(t)
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "a"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a", "agents.yaml"), []byte(`
agents:
  - name: alpha
    instructions: the secret plans of tenant A
    model: scripted
    script: [{text: a}]
`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.yaml"), []byte(`
agents:
  - name: beta
    model: scripted
    script: [{text: b}]
`), 0o600))
	tenants := filepath.Join(dir, "tenants.yaml")
	require.NoError(t, os.WriteFile(tenants, []byte(fmt.Sprintf(`
tenants:
  - name: team-a
    tokens: [token-a]
    agents: a/agents.yaml
    nats: {url: %q}
  - name: team-b
    tokens: [token-b]
    agents: b.yaml
    nats: {url: %q}
  - name: team-c
    tokens: [token-c]
    nats: {url: "nats://127.0.0.1:%d"}
`, userURL("a", "pa"), userURL("b", "pb"), freePort(t))), 0o600))

	t.Run("--agents with --tenants is refused", func(t *testing.T) {
		var errb bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a gateway that starts stops then
		defer cancel()
		code := Main(ctx, []string{"gateway", "--http", "127.0.0.1:0", "--tenants", tenants, "--agents", filepath.Join(dir, "b.yaml")},
			strings.NewReader(""), &bytes.Buffer{}, &errb, getenv(nil))
		require.Equal(t, ExitUsage, code, errb.String())
		require.Contains(t, errb.String(), "give each tenant its agents file as `agents: FILE` in the tenants file")
	})

	gw := startGatewayCommand(t, "--tenants", tenants)
	call := func(token, method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, gw.base+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(data)
	}
	// Tenant C's NATS is not there: the gateway serves A and B, and
	// answers C 503 while it keeps trying.
	var code int
	var body string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		resp, err := http.Get(gw.base + "/readyz")
		if !assert.NoError(c, err) {
			return
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		assert.Equal(c, http.StatusOK, resp.StatusCode)
		assert.Contains(c, string(data), `"tenants":{"team-a":"connected","team-b":"connected","team-c":"starting"}`)
		assert.Contains(c, string(data), `"status":"degraded"`)
	}, 30*time.Second, 20*time.Millisecond, "waited for the gateway to serve tenants A and B without C:\n%s", gw.stderr)
	code, body = call("token-c", http.MethodGet, "/v1/agents", "")
	require.Equal(t, http.StatusServiceUnavailable, code, body)
	require.Contains(t, body, "the gateway has not reached the fleet of tenant team-c yet")
	require.Contains(t, gw.stderr.String(), "waiting for NATS at nats://127.0.0.1:")

	code, body = call("token-a", http.MethodGet, "/v1/agents", "")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"alpha"`)
	require.NotContains(t, body, `"beta"`)
	code, body = call("token-b", http.MethodGet, "/v1/agents", "")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"beta"`)
	require.NotContains(t, body, "alpha", "tenant B sees tenant A's agent")
	require.NotContains(t, body, "secret plans", "tenant B sees tenant A's instructions")

	code, body = call("token-b", http.MethodPost, "/v1/runs", `{"agent": "alpha", "input": "hi"}`)
	require.Equal(t, http.StatusNotFound, code, "tenant B's run for tenant A's agent: %s", body)
	require.Contains(t, body, "UnknownAgent")
	code, body = call("token-b", http.MethodPost, "/v1/runs", `{"agent": "beta", "input": "hi"}`)
	require.Equal(t, http.StatusAccepted, code, "tenant B's run for its own agent: %s", body)
}
