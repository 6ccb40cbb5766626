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
	NATS string `json:"nats"`
}

// healthz handles GET /healthz: 200 while NATS is connected and the
// gateway is not stopping, 503 otherwise. It needs no token.
func (g *Gateway) healthz(w http.ResponseWriter, r *http.Request) {
	h := health{Status: "ok", NATS: strings.ToLower(g.cfg.Conn.Status().String())}
	code := http.StatusOK
	switch {
	case !g.cfg.Conn.IsConnected():
		h.Status, code = "unavailable", http.StatusServiceUnavailable
	case g.drain.Err() != nil:
		h.Status, code = "stopping", http.StatusServiceUnavailable
	}
	w.Header().Set("Cache-Control", "no-store")
	g.reply(w, r, code, h, nil)
}
