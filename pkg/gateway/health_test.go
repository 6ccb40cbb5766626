package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/gateway"
)

// probeBody is the body of /healthz and /readyz.
type probeBody struct {
	Status  string            `json:"status"`
	NATS    string            `json:"nats"`
	Tenants map[string]string `json:"tenants"`
	Error   string            `json:"error"`
}

// call sends a request to base and returns the status and body.
func call(t *testing.T, base, token, method, path, body string) (int, []byte) {
	t.Helper()
	var auth []string
	if token != "" {
		auth = []string{"Authorization", "Bearer " + token}
	}
	resp, err := http.DefaultClient.Do(newRequest(t, context.Background(), method, base+path, body, auth...))
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, data
}

// probe GETs a probe path and decodes its body.
func probe(t *testing.T, base, path string) (int, probeBody) {
	t.Helper()
	code, data := call(t, base, "", http.MethodGet, path, "")
	var b probeBody
	require.NoError(t, json.Unmarshal(data, &b), "%s: %s", path, data)
	return code, b
}

// waitDown waits until nc is no longer connected (its server stopped).
func waitDown(t *testing.T, nc *nats.Conn) {
	t.Helper()
	require.Eventually(t, func() bool { return !nc.IsConnected() }, 20*time.Second, 10*time.Millisecond,
		"waited for the connection to notice its server stopped (%s)", nc.Status())
}

// startGateway starts a gateway with cfg on a free port; it is stopped at
// cleanup (a stop error is expected once a connection is closed).
func startGateway(t *testing.T, cfg gateway.Config) string {
	t.Helper()
	cfg.Addr = "127.0.0.1:0"
	gw, err := gateway.New(cfg)
	require.NoError(t, err)
	require.NoError(t, gw.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = gw.Stop(ctx)
	})
	return "http://" + gw.Addr()
}

// While NATS is away the gateway is live but not ready, and answers every
// API request 503 Unavailable — never what an unreachable fleet looks like
// (an unknown agent).
func TestNATSAwayIsUnavailable(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: agents, Workers: -1})
	base := startGateway(t, gateway.Config{API: f.API, Client: f.Client, Conn: f.Conn})
	code, st := probe(t, base, "/readyz")
	require.Equal(t, http.StatusOK, code, "%+v", st)
	require.Equal(t, "ready", st.Status)

	require.NoError(t, f.Server.Shutdown(context.Background()))
	waitDown(t, f.Conn)
	code, st = probe(t, base, "/healthz")
	require.Equal(t, http.StatusOK, code, "a reconnecting gateway is live: %+v", st)
	require.Equal(t, "reconnecting", st.NATS)
	code, st = probe(t, base, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code, "a reconnecting gateway is not ready: %+v", st)
	require.Equal(t, "unavailable", st.Status)
	require.Contains(t, st.Error, "keeps retrying")

	for _, r := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/runs", `{"agent": "not-in-the-catalog", "input": "hi"}`},
		{http.MethodGet, "/v1/agents", ""},
		{http.MethodGet, "/v1/runs/some-run", ""},
	} {
		code, data := call(t, base, "", r.method, r.path, r.body)
		require.Equal(t, http.StatusServiceUnavailable, code, "%s %s: %s", r.method, r.path, data)
		typ, msg, hint := apiError(t, data)
		require.Equal(t, gateway.TypeUnavailable, typ, "%s %s: %s", r.method, r.path, data)
		require.Contains(t, msg, "not connected to NATS")
		require.Contains(t, hint, "retry shortly")
	}
}

// One tenant's NATS outage leaves the gateway ready for the others: its
// requests are answered 503, the other tenant's as usual; a tenant's
// closed connection makes the gateway not live.
func TestTenantOutage(t *testing.T) {
	t.Parallel()
	fa := fleettest.Start(t, fleettest.Options{AgentsYAML: "agents:\n  - name: alpha\n    model: scripted\n    script: [{text: a}]\n"})
	fb := fleettest.Start(t, fleettest.Options{AgentsYAML: "agents:\n  - name: beta\n    model: scripted\n    script: [{text: b}]\n", Workers: -1})
	base := startGateway(t, gateway.Config{Tenants: []gateway.Tenant{
		{Name: "a", Tokens: []string{"tok-a"}, API: fa.API, Client: fa.Client, Conn: fa.Conn},
		{Name: "b", Tokens: []string{"tok-b"}, API: fb.API, Client: fb.Client, Conn: fb.Conn},
	}})

	require.NoError(t, fb.Server.Shutdown(context.Background()))
	waitDown(t, fb.Conn)
	code, st := probe(t, base, "/readyz")
	require.Equal(t, http.StatusOK, code, "tenant b's outage takes the gateway out of service for tenant a: %+v", st)
	require.Equal(t, "degraded", st.Status)
	require.Equal(t, map[string]string{"a": "connected", "b": "reconnecting"}, st.Tenants)
	require.Contains(t, st.Error, "of tenant b")
	code, st = probe(t, base, "/healthz")
	require.Equal(t, http.StatusOK, code, "%+v", st)

	code, data := call(t, base, "tok-b", http.MethodPost, "/v1/runs", `{"agent": "beta", "input": "hi"}`)
	require.Equal(t, http.StatusServiceUnavailable, code, "tenant b's submit: %s", data)
	typ, msg, _ := apiError(t, data)
	require.Equal(t, gateway.TypeUnavailable, typ)
	require.Contains(t, msg, "of tenant b")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, data := call(t, base, "tok-a", http.MethodPost, "/v1/runs", `{"agent": "alpha", "input": "hi"}`)
		assert.Equal(c, http.StatusAccepted, code, "tenant a's submit: %s", data)
	}, 20*time.Second, 50*time.Millisecond, "waited for tenant a's submit to be accepted while tenant b is down")

	fb.Conn.Close()
	code, st = probe(t, base, "/healthz")
	require.Equal(t, http.StatusServiceUnavailable, code, "a closed connection is not live: %+v", st)
	require.Contains(t, st.Error, "of tenant b is closed")
	code, st = probe(t, base, "/readyz")
	require.Equal(t, http.StatusOK, code, "%+v", st)
	require.Equal(t, "degraded", st.Status)
}

// A tenant given with Open is opened once the gateway serves, in the
// background: until then (its NATS out of reach, an Open that fails and
// is tried again) its requests are 503 and the other tenants are served;
// Stop ends an Open that is still waiting.
func TestTenantOpenedLater(t *testing.T) {
	t.Parallel()
	fa := fleettest.Start(t, fleettest.Options{AgentsYAML: "agents:\n  - name: alpha\n    model: scripted\n    script: [{text: a}]\n", Workers: -1})
	fb := fleettest.Start(t, fleettest.Options{AgentsYAML: "agents:\n  - name: beta\n    model: scripted\n    script: [{text: b}]\n", Workers: -1})
	release := make(chan struct{})
	var opens atomic.Int32
	openB := func(ctx context.Context) (gateway.TenantFleet, error) {
		if opens.Add(1) == 1 {
			return gateway.TenantFleet{}, errors.New("nats: authorization violation")
		}
		select {
		case <-release:
			return gateway.TenantFleet{API: fb.API, Client: fb.Client, Conn: fb.Conn}, nil
		case <-ctx.Done():
			return gateway.TenantFleet{}, ctx.Err()
		}
	}
	never := func(ctx context.Context) (gateway.TenantFleet, error) {
		<-ctx.Done()
		return gateway.TenantFleet{}, ctx.Err()
	}
	cfg := gateway.Config{Addr: "127.0.0.1:0", Tenants: []gateway.Tenant{
		{Name: "a", Tokens: []string{"tok-a"}, API: fa.API, Client: fa.Client, Conn: fa.Conn},
		{Name: "b", Tokens: []string{"tok-b"}, Open: openB},
		{Name: "c", Tokens: []string{"tok-c"}, Open: never},
	}}
	gw, err := gateway.New(cfg)
	require.NoError(t, err)
	require.NoError(t, gw.Start(context.Background()))
	base := "http://" + gw.Addr()

	code, st := probe(t, base, "/readyz")
	require.Equal(t, http.StatusOK, code, "%+v", st)
	require.Equal(t, "degraded", st.Status)
	require.Equal(t, map[string]string{"a": "connected", "b": "starting", "c": "starting"}, st.Tenants)
	code, data := call(t, base, "tok-a", http.MethodGet, "/v1/agents", "")
	require.Equal(t, http.StatusOK, code, "tenant a is served while b and c are opened: %s", data)
	// b's first Open failed: its requests say why, until the next one.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, data := call(t, base, "tok-b", http.MethodGet, "/v1/agents", "")
		assert.Equal(c, http.StatusServiceUnavailable, code)
		assert.Contains(c, string(data), "the gateway has not reached the fleet of tenant b yet: nats: authorization violation")
	}, 10*time.Second, 10*time.Millisecond, "waited for tenant b's requests to say why it is not served")

	close(release)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, data := call(t, base, "tok-b", http.MethodGet, "/v1/agents", "")
		assert.Equal(c, http.StatusOK, code, "%s", data)
		assert.Contains(c, string(data), `"beta"`)
	}, 30*time.Second, 50*time.Millisecond, "waited for tenant b to be served once its Open succeeded (after the retry, %s)", gateway.TenantOpenRetry)
	code, st = probe(t, base, "/readyz")
	require.Equal(t, map[string]string{"a": "connected", "b": "connected", "c": "starting"}, st.Tenants, "%d %+v", code, st)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, gw.Stop(ctx), "Stop ends tenant c's Open and stops tenant b's micro service")
}

func TestTenantOpenConfig(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: agents, Workers: -1})
	open := func(context.Context) (gateway.TenantFleet, error) { return gateway.TenantFleet{}, nil }
	_, err := gateway.New(gateway.Config{Tenants: []gateway.Tenant{{Name: "a", Tokens: []string{"t"}, API: f.API, Open: open}}})
	require.ErrorIs(t, err, gateway.ErrInvalidConfig)
	require.ErrorContains(t, err, "Tenants[0].Open: opens the tenant's API, Client and Conn: give Open or them, not both")
	_, err = gateway.New(gateway.Config{Tenants: []gateway.Tenant{{Name: "a", Tokens: []string{"t"}}}})
	require.ErrorContains(t, err, "Tenants[0].API: is required")
}
