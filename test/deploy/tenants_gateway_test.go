package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGatewayTenants runs one fleet in each tenant account of
// deploy/nats/tenants.conf and one `lovia gateway --tenants` in front of
// both. Each tenant's token reaches its own fleet only: tenant A submits,
// approves and reads its run; with B's token, A's run does not exist (its
// status, events and approval are 404) and B's own run completes on B's
// fleet; a request without a token, or with an unknown one, is 401.
func TestGatewayTenants(t *testing.T) {
	userURL := startTenantsServer(t)
	dir := t.TempDir()
	agentsA := filepath.Join(dir, "a.yaml")
	require.NoError(t, os.WriteFile(agentsA, []byte(`
agents:
  - name: helper
    model: scripted
    tools: [echo]
    approval: [echo]
    script:
      - call: {name: echo, args: {text: from-a}, id: c1}
      - text: done in A
`), 0o600))
	agentsB := filepath.Join(dir, "b.yaml")
	require.NoError(t, os.WriteFile(agentsB, []byte(`
agents:
  - name: helper
    model: scripted
    script:
      - text: done in B
`), 0o600))
	startCommand(t, "serving agents helper", "worker", "--nats", userURL("a-fleet", "TENANT_A_FLEET_PASSWORD"),
		"--agents", agentsA, "--workspace", t.TempDir())
	startCommand(t, "serving agents helper", "worker", "--nats", userURL("b-fleet", "TENANT_B_FLEET_PASSWORD"),
		"--agents", agentsB, "--workspace", t.TempDir())
	tenants := filepath.Join(dir, "tenants.yaml")
	require.NoError(t, os.WriteFile(tenants, []byte(fmt.Sprintf(`
tenants:
  - name: team-a
    tokens: [token-a, token-a2]
    nats: {url: %q}
  - name: team-b
    tokens: [token-b]
    nats: {url: %q}
`, userURL("a-fleet", "TENANT_A_FLEET_PASSWORD"), userURL("b-fleet", "TENANT_B_FLEET_PASSWORD"))), 0o600))
	out := startCommand(t, "serving tenants team-a, team-b", "gateway", "--http", "127.0.0.1:0", "--tenants", tenants)
	m := regexp.MustCompile(`lovia gateway on (http://\S+)`).FindStringSubmatch(out.String())
	require.NotNil(t, m, "the gateway's address in its output:\n%s", out.String())
	base := m[1]

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	call := func(token, method, path, body string) (int, map[string]any) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
		require.NoError(t, err)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		var v map[string]any
		_ = json.Unmarshal(data, &v)
		return resp.StatusCode, v
	}
	status := func(token, runID string) string {
		code, v := call(token, http.MethodGet, "/v1/runs/"+runID, "")
		require.Equal(t, http.StatusOK, code, "status of %s: %v", runID, v)
		return fmt.Sprint(v["status"])
	}

	// The gateway opens each tenant's fleet once it listens.
	waitFor(t, ctx, "the gateway to be ready for both tenants", func() error {
		if code, v := call("", http.MethodGet, "/readyz", ""); code != http.StatusOK || v["status"] != "ready" {
			return fmt.Errorf("readyz: %d %v", code, v)
		}
		return nil
	})
	code, _ := call("", http.MethodGet, "/v1/agents", "")
	require.Equal(t, http.StatusUnauthorized, code, "a request without a token")
	code, _ = call("token-c", http.MethodGet, "/v1/agents", "")
	require.Equal(t, http.StatusUnauthorized, code, "a token bound to no tenant")

	var runA string
	waitFor(t, ctx, "tenant A's fleet to accept a submit through the gateway", func() error {
		code, v := call("token-a", http.MethodPost, "/v1/runs", `{"agent":"helper","input":"go"}`)
		if code != http.StatusAccepted {
			return fmt.Errorf("submit: %d %v", code, v)
		}
		runA = fmt.Sprint(v["run_id"])
		return nil
	})
	// B's token does not reach A's run: not its status, its events or its
	// approval.
	for _, r := range []struct{ method, path, body string }{
		{http.MethodGet, "/v1/runs/" + runA, ""},
		{http.MethodGet, "/v1/runs/" + runA + "/events", ""},
		{http.MethodPost, "/v1/runs/" + runA + "/approvals/c1", `{"decision":"approve"}`},
		{http.MethodPost, "/v1/runs/" + runA + "/cancel", `{}`},
	} {
		code, v := call("token-b", r.method, r.path, r.body)
		require.Equal(t, http.StatusNotFound, code, "tenant B's token on %s %s: %v", r.method, r.path, v)
	}
	// A approves its own call (with its second token) and the run ends.
	waitFor(t, ctx, "tenant A's approval to be accepted", func() error {
		code, v := call("token-a2", http.MethodPost, "/v1/runs/"+runA+"/approvals/c1", `{"decision":"approve"}`)
		if code != http.StatusOK {
			return fmt.Errorf("approve: %d %v", code, v)
		}
		return nil
	})
	waitFor(t, ctx, "tenant A's run to complete", func() error {
		if s := status("token-a", runA); s != "completed" {
			return fmt.Errorf("status %s", s)
		}
		return nil
	})

	// B's run completes on B's fleet, and A's token does not reach it.
	code, v := call("token-b", http.MethodPost, "/v1/runs", `{"agent":"helper","input":"go"}`)
	require.Equal(t, http.StatusAccepted, code, "tenant B's submit: %v", v)
	runB := fmt.Sprint(v["run_id"])
	waitFor(t, ctx, "tenant B's run to complete", func() error {
		if s := status("token-b", runB); s != "completed" {
			return fmt.Errorf("status %s", s)
		}
		return nil
	})
	code, v = call("token-a", http.MethodGet, "/v1/runs/"+runB, "")
	require.Equal(t, http.StatusNotFound, code, "tenant A's token on tenant B's run: %v", v)

	code, v = call("", http.MethodGet, "/healthz", "")
	require.Equal(t, http.StatusOK, code, "health: %v", v)
	require.Equal(t, map[string]any{"team-a": "connected", "team-b": "connected"}, v["tenants"])
}
