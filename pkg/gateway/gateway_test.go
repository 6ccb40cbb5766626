package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/gateway"
	"github.com/lovia-fleet/lovia/pkg/service"
)

func TestConfig(t *testing.T) {
	t.Parallel()
	valid := gateway.Config{API: &service.API{}, Client: &client.Client{}, Conn: &nats.Conn{}}

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		c := gateway.Config{}.WithDefaults()
		require.Equal(t, ":8080", c.Addr)
		require.EqualValues(t, 1<<20, c.MaxBodyBytes)
		require.Equal(t, 15*time.Second, c.Heartbeat)
		require.Equal(t, 10*time.Second, c.ReadHeaderTimeout)
		require.Equal(t, 10*time.Second, c.ShutdownTimeout)
		require.NotNil(t, c.Logger)
		require.NotNil(t, c.Metrics)
	})

	for name, tc := range map[string]struct {
		edit  func(*gateway.Config)
		field string
	}{
		"API":        {func(c *gateway.Config) { c.API = nil }, "Config.API"},
		"Client":     {func(c *gateway.Config) { c.Client = nil }, "Config.Client"},
		"Conn":       {func(c *gateway.Config) { c.Conn = nil }, "Config.Conn"},
		"Addr":       {func(c *gateway.Config) { c.Addr = "8080" }, "Config.Addr"},
		"Token":      {func(c *gateway.Config) { c.Tokens = []string{"a", ""} }, "Config.Tokens[1]"},
		"Heartbeat":  {func(c *gateway.Config) { c.Heartbeat = -time.Second }, "Config.Heartbeat"},
		"MaxBody":    {func(c *gateway.Config) { c.MaxBodyBytes = -1 }, "Config.MaxBodyBytes"},
		"Origin":     {func(c *gateway.Config) { c.CORSOrigins = []string{"*", "app.example.com"} }, "Config.CORSOrigins[1]"},
		"OriginPath": {func(c *gateway.Config) { c.CORSOrigins = []string{"https://app.example.com/x"} }, "Config.CORSOrigins[0]"},
	} {
		t.Run("Rejects"+name, func(t *testing.T) {
			t.Parallel()
			c := valid
			tc.edit(&c)
			_, err := gateway.New(c)
			require.ErrorIs(t, err, gateway.ErrInvalidConfig)
			require.Contains(t, err.Error(), tc.field)
		})
	}
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NotContains(t, b.gw.Addr(), ":0", "Addr reports the port picked for :0")
	require.ErrorIs(t, b.gw.Start(context.Background()), gateway.ErrStarted)

	resp, data := b.do(t, http.MethodGet, "/healthz", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.JSONEq(t, `{"status": "ok", "nats": "connected"}`, string(data))

	require.NoError(t, b.gw.Stop(context.Background()))
	require.NoError(t, b.gw.Stop(context.Background()), "a second Stop")
	require.ErrorIs(t, b.gw.Start(context.Background()), gateway.ErrStopped)
	_, err := b.http.Get(b.url + "/healthz")
	require.Error(t, err, "still serving after Stop")
}

func TestServesTheMicroService(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Only the fleet's service and the gateway's answer on this prefix;
	// the gateway's is one more responder in the queue group.
	svcs := 0
	sub, err := b.f.Conn.SubscribeSync(nats.NewInbox())
	require.NoError(t, err)
	defer sub.Unsubscribe()
	require.NoError(t, b.f.Conn.PublishRequest("$SRV.PING.lovia", sub.Subject, nil))
	for {
		if _, err := sub.NextMsg(500 * time.Millisecond); err != nil {
			break
		}
		svcs++
	}
	require.Equal(t, 2, svcs, "the fleet's service and the gateway's")
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A gateway whose connection is closed is neither live nor ready.
	conn := b.f.Connect()
	gw, err := gateway.New(gateway.Config{API: b.f.API, Client: b.f.Client, Conn: conn})
	require.NoError(t, err)
	srv := httptest.NewServer(gw.Handler())
	defer srv.Close()
	conn.Close()
	get := func(path string) (int, string) {
		resp, err := srv.Client().Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		var body strings.Builder
		_, _ = io.Copy(&body, resp.Body)
		return resp.StatusCode, body.String()
	}
	code, body := get("/healthz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.JSONEq(t, `{"status": "unavailable", "nats": "closed", "error": "the NATS connection is closed and does not reconnect: restart the gateway"}`, body)
	code, body = get("/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.JSONEq(t, `{"status": "unavailable", "nats": "closed", "error": "not connected to NATS (closed)"}`, body)
}

func TestAuth(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *gateway.Config) { c.Tokens = []string{"s3cret", "other"} })

	resp, data := b.do(t, http.MethodGet, "/v1/agents", "")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Equal(t, `Bearer realm="lovia"`, resp.Header.Get("WWW-Authenticate"))
	typ, _, hint := apiError(t, data)
	require.Equal(t, "Unauthorized", typ)
	require.Contains(t, hint, "Authorization: Bearer")

	resp, _ = b.do(t, http.MethodGet, "/v1/agents", "", "Authorization", "Bearer wrong")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`)

	resp, _ = b.do(t, http.MethodPost, "/v1/runs", `{"agent": "calc", "input": "x"}`, "Authorization", "Basic czNjcmV0")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	for _, tok := range []string{"s3cret", "other"} {
		resp, data = b.do(t, http.MethodGet, "/v1/agents", "", "Authorization", "Bearer "+tok)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
	}
	resp, _ = b.do(t, http.MethodGet, "/v1/agents", "", "Authorization", "bearer s3cret")
	require.Equal(t, http.StatusOK, resp.StatusCode, "the scheme is case-insensitive")

	// Event streams take ?access_token= (a browser EventSource sends no
	// headers); other routes do not.
	resp, _ = b.do(t, http.MethodGet, "/v1/runs/ghost/events?access_token=s3cret", "")
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "authorized by the query token, then an unknown run")
	resp, _ = b.do(t, http.MethodGet, "/v1/runs/ghost/events?access_token=wrong", "")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, _ = b.do(t, http.MethodGet, "/v1/agents?access_token=s3cret", "")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	resp, _ = b.do(t, http.MethodGet, "/healthz", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, "healthz needs no token")
	resp, _ = b.do(t, http.MethodGet, "/metrics", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, "metrics need no token (Prometheus scrapes them; they hold no run's data)")
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.do(t, http.MethodGet, "/healthz", "")
	b.do(t, http.MethodGet, "/v1/runs/ghost", "")
	b.do(t, http.MethodGet, "/v1/runs/ghost-2", "")
	b.do(t, http.MethodGet, "/no/such/path", "")

	text := scrape(t, b)
	for _, want := range []string{
		`lovia_gateway_requests_total{code="200",route="GET /healthz"} 1`,
		`lovia_gateway_requests_total{code="404",route="GET /v1/runs/{id}"} 2`,
		`lovia_gateway_requests_total{code="404",route="other"} 1`,
		`lovia_gateway_request_seconds_bucket{code="200",route="GET /healthz",le="+Inf"} 1`,
		`lovia_gateway_sse_streams 0`,
	} {
		require.Contains(t, text, want)
	}
}

// TestCORS: browser pages of an allowed origin get CORS headers on every
// reply (errors included) and their preflights are answered before the
// token check; other origins get none, and a clear 403 on preflight.
func TestCORS(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *gateway.Config) {
		c.Tokens = []string{"s3cret"}
		c.CORSOrigins = []string{"https://App.example.com/"}
	})
	const app = "https://app.example.com"

	// Preflight of a submit: no token, answered 204 with what may follow.
	resp, _ := b.do(t, http.MethodOptions, "/v1/runs", "", "Origin", app,
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, content-type")
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.Equal(t, app, resp.Header.Get("Access-Control-Allow-Origin"))
	require.Contains(t, resp.Header.Get("Access-Control-Allow-Methods"), "POST")
	require.Contains(t, resp.Header.Get("Access-Control-Allow-Headers"), "Authorization")
	require.Contains(t, resp.Header.Get("Access-Control-Allow-Headers"), "Last-Event-ID")
	require.Contains(t, resp.Header.Values("Vary"), "Origin")

	// The request itself: CORS headers, the run id readable by the page.
	resp, data := b.do(t, http.MethodPost, "/v1/runs", `{"agent": "calc", "input": "x"}`,
		"Origin", app, "Authorization", "Bearer s3cret", "Content-Type", "application/json")
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(data))
	require.Equal(t, app, resp.Header.Get("Access-Control-Allow-Origin"))
	require.Contains(t, resp.Header.Get("Access-Control-Expose-Headers"), "Lovia-Run-Id")

	// A refused token is still readable by the page (it can show why).
	resp, _ = b.do(t, http.MethodGet, "/v1/agents", "", "Origin", app)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Equal(t, app, resp.Header.Get("Access-Control-Allow-Origin"))

	// Another origin: no CORS headers; its preflight is refused with a hint.
	resp, _ = b.do(t, http.MethodGet, "/v1/agents", "", "Origin", "https://evil.example", "Authorization", "Bearer s3cret")
	require.Equal(t, http.StatusOK, resp.StatusCode, "non-browser semantics are unchanged")
	require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
	resp, data = b.do(t, http.MethodOptions, "/v1/runs", "", "Origin", "https://evil.example", "Access-Control-Request-Method", "POST")
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
	typ, _, hint := apiError(t, data)
	require.Equal(t, gateway.TypeForbidden, typ)
	require.Contains(t, hint, "--cors-origin https://evil.example")

	// Without CORSOrigins, no CORS headers at all and OPTIONS is a 405.
	plain := setup(t)
	resp, _ = plain.do(t, http.MethodOptions, "/v1/runs", "", "Origin", app, "Access-Control-Request-Method", "POST")
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
}
