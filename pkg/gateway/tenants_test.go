package gateway_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/gateway"
)

// TestTenantTokens serves two fleets (two NATS servers, as two accounts
// would be) from one gateway: each token reaches the fleet of the tenant
// it is bound to, the metrics say which tenant answered, and /healthz
// reports each tenant's connection.
func TestTenantTokens(t *testing.T) {
	fa := fleettest.Start(t, fleettest.Options{AgentsYAML: "agents:\n  - name: alpha\n    model: scripted\n    script: [{text: a}]\n"})
	fb := fleettest.Start(t, fleettest.Options{AgentsYAML: "agents:\n  - name: beta\n    model: scripted\n    script: [{text: b}]\n"})
	reg := prometheus.NewRegistry()
	gw, err := gateway.New(gateway.Config{Addr: "127.0.0.1:0", Metrics: reg, Tenants: []gateway.Tenant{
		{Name: "a", Tokens: []string{"tok-a"}, API: fa.API, Client: fa.Client, Conn: fa.Conn},
		{Name: "b", Tokens: []string{"tok-b"}, API: fb.API, Client: fb.Client, Conn: fb.Conn},
	}})
	require.NoError(t, err)
	require.NoError(t, gw.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, gw.Stop(ctx))
	})
	get := func(token, path string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://"+gw.Addr()+path, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	waitAgents := func(token, want, other string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			code, body := get(token, "/v1/agents")
			if code == http.StatusOK && strings.Contains(body, want) {
				require.NotContains(t, body, other, "the token of one tenant lists another's agents")
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("waited 30s for %s's agents list to name %q: %d %s", token, want, code, body)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitAgents("tok-a", `"alpha"`, `"beta"`)
	waitAgents("tok-b", `"beta"`, `"alpha"`)
	code, _ := get("tok-c", "/v1/agents")
	require.Equal(t, http.StatusUnauthorized, code)

	code, body := get("", "/healthz")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"tenants":{"a":"connected","b":"connected"}`)

	requests := func(tenant, code string) float64 {
		return sample(t, reg, "lovia_gateway_requests_total", map[string]string{"tenant": tenant, "route": "GET /v1/agents", "code": code})
	}
	require.Positive(t, requests("a", "200"), "tenant a's requests are counted under its label")
	require.Positive(t, requests("b", "200"))
	require.Positive(t, requests("none", "401"), "refused requests are counted under tenant none")
}

// sample returns the value of the counter sample with the given labels.
func sample(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no %s sample with labels %v", name, labels)
	return 0
}

// TestTenantConfigErrors: a tenants config that could let one token reach
// two tenants, or a tenant no request can reach, is refused with the field.
func TestTenantConfigErrors(t *testing.T) {
	f := fleettest.Start(t, fleettest.Options{Workers: -1, AgentsYAML: "agents:\n  - name: alpha\n    model: scripted\n    script: [{text: a}]\n"})
	ok := gateway.Tenant{Name: "a", Tokens: []string{"t1"}, API: f.API, Client: f.Client, Conn: f.Conn}
	for name, c := range map[string]struct {
		cfg  gateway.Config
		want string
	}{
		"token bound twice": {gateway.Config{Tenants: []gateway.Tenant{ok, {Name: "b", Tokens: []string{"t1"}, API: f.API, Client: f.Client, Conn: f.Conn}}},
			`Tenants[1].Tokens[0]: the token is already bound to tenant "a"`},
		"no tokens":      {gateway.Config{Tenants: []gateway.Tenant{{Name: "a", API: f.API, Client: f.Client, Conn: f.Conn}}}, `tenant "a" needs at least one token`},
		"name twice":     {gateway.Config{Tenants: []gateway.Tenant{ok, {Name: "a", Tokens: []string{"t2"}, API: f.API, Client: f.Client, Conn: f.Conn}}}, `tenant "a" is listed twice`},
		"bad name":       {gateway.Config{Tenants: []gateway.Tenant{{Name: "a b", Tokens: []string{"t"}, API: f.API, Client: f.Client, Conn: f.Conn}}}, `"a b" is not a tenant name`},
		"global tokens":  {gateway.Config{Tokens: []string{"x"}, Tenants: []gateway.Tenant{ok}}, "move them to Tenant.Tokens"},
		"global fleet":   {gateway.Config{API: f.API, Tenants: []gateway.Tenant{ok}}, "leave Config.API, Client and Conn empty"},
		"tenant without": {gateway.Config{Tenants: []gateway.Tenant{{Name: "a", Tokens: []string{"t"}, Client: f.Client, Conn: f.Conn}}}, "Tenants[0].API: is required"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := gateway.New(c.cfg)
			require.ErrorContains(t, err, c.want)
		})
	}
}
