package gateway

import (
	"net/http"
	"strings"
)

// health is the body of GET /healthz.
type health struct {
	// Status is "ok", "unavailable" (NATS is not connected) or
	// "stopping".
	Status string `json:"status"`
	// NATS is the connection's state: "connected", "reconnecting", ….
	// On a gateway that serves tenants it is the first tenant
	// connection's state that is not "connected", if any.
	NATS string `json:"nats"`
	// Tenants is each tenant's connection state, on a gateway that serves
	// tenants.
	Tenants map[string]string `json:"tenants,omitempty"`
}

// healthz handles GET /healthz: 200 while NATS is connected (every
// tenant's connection, on a gateway that serves tenants) and the gateway
// is not stopping, 503 otherwise. It needs no token.
func (g *Gateway) healthz(w http.ResponseWriter, r *http.Request) {
	h := health{Status: "ok", NATS: "connected"}
	code := http.StatusOK
	for _, f := range g.fleets() {
		state := strings.ToLower(f.cfg.Conn.Status().String())
		if f.tenant != "" {
			if h.Tenants == nil {
				h.Tenants = map[string]string{}
			}
			h.Tenants[f.tenant] = state
		}
		if !f.cfg.Conn.IsConnected() {
			if code == http.StatusOK {
				h.NATS = state
			}
			h.Status, code = "unavailable", http.StatusServiceUnavailable
		} else if f.tenant == "" {
			h.NATS = state
		}
	}
	if code == http.StatusOK && g.drain.Err() != nil {
		h.Status, code = "stopping", http.StatusServiceUnavailable
	}
	w.Header().Set("Cache-Control", "no-store")
	g.reply(w, r, code, h, nil)
}
