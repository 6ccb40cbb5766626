package gateway

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// Route patterns (Go 1.22 ServeMux syntax). They are also the route labels
// of the metrics.
const (
	routeSubmit   = "POST /v1/runs"
	routeStatus   = "GET /v1/runs/{id}"
	routeEvents   = "GET /v1/runs/{id}/events"
	routeApprove  = "POST /v1/runs/{id}/approvals/{call_id}"
	routeCancel   = "POST /v1/runs/{id}/cancel"
	routeInject   = "POST /v1/runs/{id}/messages"
	routeUninject = "DELETE /v1/runs/{id}/messages/{token}"
	routeSession  = "GET /v1/sessions/{id}"
	routeRewind   = "POST /v1/sessions/{id}/rewind"
	routeAgents   = "GET /v1/agents"
	routeWorkers  = "GET /v1/workers"
	// The agents registry.
	routeRegistryApply   = "PUT /v1/registry/agents"
	routeRegistryList    = "GET /v1/registry/agents"
	routeRegistryGet     = "GET /v1/registry/agents/{name}"
	routeRegistryHistory = "GET /v1/registry/agents/{name}/history"
	routeRegistryRemove  = "DELETE /v1/registry/agents/{name}"
	routeHealth          = "GET /healthz"
	routeReady           = "GET /readyz"
	routeMetrics         = "GET /metrics"
	// routeOther labels requests no route matched.
	routeOther = "other"
)

// routes builds the mux and wraps it in authentication and metrics.
func (g *Gateway) routes() http.Handler {
	mux := http.NewServeMux()
	for pattern, h := range map[string]http.HandlerFunc{
		routeSubmit:          g.submit,
		routeStatus:          g.status,
		routeEvents:          g.events,
		routeApprove:         g.approve,
		routeCancel:          g.cancel,
		routeInject:          g.inject,
		routeUninject:        g.uninject,
		routeSession:         g.session,
		routeRewind:          g.rewind,
		routeAgents:          g.agents,
		routeWorkers:         g.workers,
		routeRegistryApply:   g.registryApply,
		routeRegistryList:    g.registryList,
		routeRegistryGet:     g.registryGet,
		routeRegistryHistory: g.registryHistory,
		routeRegistryRemove:  g.registryRemove,
		routeHealth:          g.healthz,
		routeReady:           g.readyz,
		routeMetrics:         promhttp.HandlerFor(g.cfg.Metrics, promhttp.HandlerOpts{}).ServeHTTP,
	} {
		mux.HandleFunc(pattern, h)
	}
	for pattern, h := range g.scheduleRoutes() { // schedules.go
		mux.HandleFunc(pattern, h)
	}
	for pattern, h := range g.runsListRoutes() { // runs_list.go
		mux.HandleFunc(pattern, h)
	}
	for pattern, h := range g.sessionRoutes() { // sessions.go
		mux.HandleFunc(pattern, h)
	}
	g.mux = mux
	return withConsole(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { g.serve(mux, w, r) })) // console.go
}

// serve is the outer handler: it labels the request with its route,
// applies the write deadline, sets CORS headers and answers preflights,
// checks the bearer token (all routes but GET /healthz and GET /metrics)
// — which, on a gateway that serves tenants, picks the tenant that answers
// — and answers unrouted requests with JSON errors.
func (g *Gateway) serve(mux *http.ServeMux, w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	h, pattern := mux.Handler(r)
	route := pattern
	if !known(pattern) {
		route = routeOther
	}
	rec := &recorder{ResponseWriter: w}
	m := g.m
	defer func() {
		code := strconv.Itoa(rec.code())
		m.requests.WithLabelValues(route, code).Inc()
		m.seconds.WithLabelValues(route, code).Observe(time.Since(start).Seconds())
	}()
	_ = http.NewResponseController(rec).SetWriteDeadline(time.Now().Add(g.cfg.WriteTimeout))
	if g.cors(rec, r) {
		return
	}
	target := g
	// Health and metrics need no token, as load balancers and Prometheus
	// expect: neither says anything about a run.
	probe := pattern == routeHealth || pattern == routeReady || pattern == routeMetrics
	if !probe {
		var ok bool
		if target, ok = g.authorize(rec, r); !ok {
			return
		}
		m = target.m
	}
	if pattern == "" {
		g.unrouted(h, rec, r)
		return
	}
	if !probe {
		// Every other route needs the fleet's NATS: while it is away the
		// answer is 503, never what an unreachable fleet looks like (an
		// unknown agent, a run not found).
		if herr := target.natsDown(); herr != nil {
			target.fail(rec, r, herr)
			return
		}
	}
	target.mux.ServeHTTP(rec, r) // routes again, and sets the path values
}

func known(pattern string) bool {
	switch pattern {
	case routeSubmit, routeStatus, routeEvents, routeApprove, routeCancel, routeInject, routeUninject,
		routeSession, routeRewind, routeAgents, routeWorkers, routeHealth, routeReady, routeMetrics,
		routeRegistryApply, routeRegistryList, routeRegistryGet, routeRegistryHistory, routeRegistryRemove:
		return true
	}
	return isScheduleRoute(pattern) || isRunsListRoute(pattern) || isSessionRoute(pattern) // schedules.go, runs_list.go, sessions.go
}

// authorize checks the bearer token and returns the gateway that answers
// the request: g itself, or on a gateway that serves tenants the tenant's
// the token is bound to. Tokens are compared in constant time, against
// every configured token whatever matches. It answers 401 when the token
// is missing or wrong.
func (g *Gateway) authorize(w http.ResponseWriter, r *http.Request) (*Gateway, bool) {
	if len(g.tokens) == 0 && len(g.tenants) == 0 {
		return g, true
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok && r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/events") {
		// A browser EventSource cannot send headers: event streams also
		// take the token as ?access_token= (RFC 6750 §2.3).
		if q := r.URL.Query().Get("access_token"); q != "" {
			scheme, token, ok = "Bearer", q, true
		}
	}
	if ok && strings.EqualFold(scheme, "Bearer") {
		if target := g.bound(strings.TrimSpace(token)); target != nil {
			return target, true
		}
		g.m.authFailed.Inc()
		w.Header().Set("WWW-Authenticate", `Bearer realm="lovia", error="invalid_token"`)
		g.fail(w, r, newError(http.StatusUnauthorized, TypeUnauthorized, "the bearer token is not valid", "send one of the gateway's tokens (--token, LOVIA_TOKENS, or a tenant's token from --tenants)"))
		return nil, false
	}
	g.m.authFailed.Inc()
	w.Header().Set("WWW-Authenticate", `Bearer realm="lovia"`)
	g.fail(w, r, newError(http.StatusUnauthorized, TypeUnauthorized, "this gateway needs a bearer token", "send the header Authorization: Bearer <token>"))
	return nil, false
}

// bound returns the gateway token reaches: a tenant's, g, or nil.
func (g *Gateway) bound(token string) *Gateway {
	if len(g.tenants) > 0 {
		return g.tenantOf(token)
	}
	sum := sha256.Sum256([]byte(token))
	var found *Gateway
	for _, t := range g.tokens {
		if constantTimeEqual(sum, t) {
			found = g
		}
	}
	return found
}

// unrouted answers a request no route matched: 405 (with Allow) when the
// path exists for other methods, else 404, both as JSON errors.
func (g *Gateway) unrouted(h http.Handler, w http.ResponseWriter, r *http.Request) {
	probe := &statusProbe{header: w.Header()}
	h.ServeHTTP(probe, r) // the mux's own 404/405 handler: sets Allow
	if probe.status == http.StatusMethodNotAllowed {
		g.fail(w, r, newError(http.StatusMethodNotAllowed, TypeMethodNotAllowed,
			fmt.Sprintf("%s is not allowed on %s", r.Method, r.URL.Path), "use "+w.Header().Get("Allow")))
		return
	}
	g.fail(w, r, newError(http.StatusNotFound, bus.TypeNotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path),
		"the routes are /v1/runs, /v1/runs/{id}[/events|/cancel|/messages|/approvals/{call_id}], /v1/sessions[/{id}[/rewind|/trim|/export]], /v1/agents, /v1/workers, /v1/registry/agents[/{name}[/history]], /healthz, /readyz, /metrics"))
}

// statusProbe records the status a handler writes and discards its body.
type statusProbe struct {
	header http.Header
	status int
}

func (p *statusProbe) Header() http.Header { return p.header }

func (p *statusProbe) Write(b []byte) (int, error) { return len(b), nil }

func (p *statusProbe) WriteHeader(code int) {
	if p.status == 0 {
		p.status = code
	}
}

// recorder remembers the status of a response for the metrics. Unwrap
// lets http.ResponseController reach the connection (flush, deadlines).
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) code() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

// writeJSON writes v as a JSON reply.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	body, err := bus.Marshal(bus.JSON, v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", bus.ContentTypeJSON)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(status)
	_, err = w.Write(append(body, '\n'))
	return err
}

// reply writes a successful reply, or the error reply of err.
func (g *Gateway) reply(w http.ResponseWriter, r *http.Request, status int, v any, err error) {
	if err != nil {
		g.fail(w, r, err)
		return
	}
	if err := writeJSON(w, status, v); err != nil {
		g.log.Debug("gateway: writing a reply failed", "route", r.Pattern, "error", err)
	}
}

// fail writes the error reply {"error": {type, message, hint}} of err.
func (g *Gateway) fail(w http.ResponseWriter, r *http.Request, err error) {
	he := errorOf(err)
	if g.cfg.Conn != nil && lostNATS(he) {
		// The connection dropped while the request was answered: what the
		// fleet looked like then (no such agent, no such run) is not an
		// answer.
		if down := g.natsDown(); down != nil {
			down.cause = err
			he = down
		}
	}
	if he.status >= 500 && !errors.Is(err, context.Canceled) {
		g.log.Warn("gateway: request failed", "method", r.Method, "path", r.URL.Path, "status", he.status, "error", err)
	}
	w.Header().Del("Content-Length")
	if err := writeJSON(w, he.status, &bus.ErrorReply{Error: he.body}); err != nil {
		g.log.Debug("gateway: writing an error reply failed", "error", err)
	}
}
