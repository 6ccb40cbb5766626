package gateway

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/nats-io/nats.go"
)

// health is the body of GET /healthz and GET /readyz.
type health struct {
	// Status is "ok" or "unavailable" (healthz); "ready", "degraded"
	// (some tenants' NATS is not connected, the others are served),
	// "unavailable" or "stopping" (readyz).
	Status string `json:"status"`
	// NATS is the connection's state: "connected", "reconnecting",
	// "closed", … ("starting": a tenant not opened yet). On a gateway that serves tenants it is the first
	// tenant connection's state that is not "connected", if any.
	NATS string `json:"nats"`
	// Tenants is each tenant's connection state, on a gateway that serves
	// tenants.
	Tenants map[string]string `json:"tenants,omitempty"`
	// Error says why the gateway is not live or not (fully) ready.
	Error string `json:"error,omitempty"`
}

// natsState is a connection's state as health reports it.
func natsState(nc *nats.Conn) string { return strings.ToLower(nc.Status().String()) }

// states reports each fleet's connection state: h.NATS and h.Tenants,
// and the names of the fleets whose connection is closed and of those
// that are not connected.
func (g *Gateway) states() (h health, closed, down []string) {
	h.NATS = "connected"
	for _, f := range g.fleets() {
		state := "starting" // a tenant not opened yet
		if !f.opening() {
			state = natsState(f.cfg.Conn)
		}
		if f.tenant != "" {
			if h.Tenants == nil {
				h.Tenants = map[string]string{}
			}
			h.Tenants[f.tenant] = state
		}
		if !f.opening() && f.cfg.Conn.IsClosed() {
			closed = append(closed, f.tenant)
		}
		if f.opening() || !f.cfg.Conn.IsConnected() {
			if len(down) == 0 {
				h.NATS = state
			}
			down = append(down, f.tenant)
		}
	}
	return h, closed, down
}

// healthz handles GET /healthz, liveness: 200 while the gateway serves
// HTTP and every NATS connection is connected or reconnecting (a NATS
// outage is no reason to restart a gateway: it reconnects by itself), also
// while it stops; 503 when a connection is closed, which never comes back:
// restart the gateway. It needs no token.
func (g *Gateway) healthz(w http.ResponseWriter, r *http.Request) {
	h, closed, _ := g.states()
	h.Status = "ok"
	code := http.StatusOK
	if len(closed) > 0 {
		h.Status, code = "unavailable", http.StatusServiceUnavailable
		h.Error = "the NATS connection" + tenantsSuffix(closed) + " is closed and does not reconnect: restart the gateway"
	}
	w.Header().Set("Cache-Control", "no-store")
	g.reply(w, r, code, h, nil)
}

// readyz handles GET /readyz, readiness: 200 "ready" while NATS is
// connected and the gateway is not stopping. On a gateway that serves
// tenants it is 200 while any tenant's connection is connected —
// "degraded", naming the tenants whose requests are answered 503 until
// their connection is back — so one tenant's outage does not take the
// gateway out of service for the others. 503 otherwise. It needs no
// token.
func (g *Gateway) readyz(w http.ResponseWriter, r *http.Request) {
	h, _, down := g.states()
	h.Status = "ready"
	code := http.StatusOK
	switch {
	case g.drain.Err() != nil:
		h.Status, code = "stopping", http.StatusServiceUnavailable
		h.Error = "the gateway is shutting down"
	case len(down) == len(g.fleets()):
		h.Status, code = "unavailable", http.StatusServiceUnavailable
		h.Error = "not connected to NATS" + tenantsSuffix(down) + " (" + h.NATS + ")"
		if h.NATS != "closed" {
			h.Error += "; the connection keeps retrying"
		}
	case len(down) > 0:
		h.Status = "degraded"
		h.Error = "not connected to NATS" + tenantsSuffix(down) + ": their requests are answered 503 until the connection is back; the other tenants are served"
	}
	w.Header().Set("Cache-Control", "no-store")
	g.reply(w, r, code, h, nil)
}

// tenantsSuffix is " of tenant a, b" for fleets named by tenant, "" for
// the one fleet of a gateway without tenants.
func tenantsSuffix(names []string) string {
	if len(names) == 0 || names[0] == "" {
		return ""
	}
	if len(names) == 1 {
		return " of tenant " + names[0]
	}
	return " of tenants " + strings.Join(names, ", ")
}

// natsDown is the reply to a request for a fleet whose NATS connection is
// not connected, or nil when it is.
func (g *Gateway) natsDown() *httpError {
	if g.opening() {
		msg := "the gateway has not reached the fleet" + g.tenantSuffix() + " yet"
		if last := g.openErr.Load(); last != nil {
			msg += ": " + *last
		}
		return newError(http.StatusServiceUnavailable, TypeUnavailable, msg, "it keeps trying: retry shortly")
	}
	if g.cfg.Conn.IsConnected() {
		return nil
	}
	state := natsState(g.cfg.Conn)
	msg := fmt.Sprintf("the gateway is not connected to NATS%s (%s)", g.tenantSuffix(), state)
	hint := "the connection keeps retrying: retry shortly"
	if g.cfg.Conn.IsClosed() {
		hint = "the connection is closed and does not reconnect: restart the gateway"
	}
	return newError(http.StatusServiceUnavailable, TypeUnavailable, msg, hint)
}
