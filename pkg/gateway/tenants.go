package gateway

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"

	"github.com/prometheus/client_golang/prometheus"
)

// noTenant labels the metrics of requests that reached no tenant (refused
// tokens, /healthz, /metrics) on a gateway that serves tenants.
const noTenant = "none"

// newTenants builds a gateway that serves cfg.Tenants: one gateway per
// tenant, each on its tenant's API, client and connection with its
// metrics labelled tenant="<name>", behind one handler that picks the
// tenant by the bearer token.
func newTenants(cfg Config) (*Gateway, error) {
	top := cfg
	top.Tenants = nil
	m, err := newMetrics(prometheus.WrapRegistererWith(prometheus.Labels{"tenant": noTenant}, cfg.Metrics))
	if err != nil {
		return nil, err
	}
	g := &Gateway{cfg: top, log: cfg.Logger, m: m, stopped: make(chan struct{})}
	for _, o := range cfg.CORSOrigins {
		g.origins = append(g.origins, normalizeOrigin(o))
	}
	g.drain, g.drainStop = context.WithCancel(context.Background())
	for _, t := range cfg.Tenants {
		tc := cfg
		tc.Tenants = nil
		tc.API, tc.Client, tc.Conn, tc.Tokens = t.API, t.Client, t.Conn, t.Tokens
		tc.Logger = cfg.Logger.With("tenant", t.Name)
		tg, err := newFleet(tc, prometheus.WrapRegistererWith(prometheus.Labels{"tenant": t.Name}, cfg.Metrics))
		if err != nil {
			return nil, err
		}
		tg.tenant = t.Name
		tg.drain = g.drain                  // Stop ends every tenant's event streams
		tg.handler = tg.traced(tg.routes()) // tracing.go
		g.tenants = append(g.tenants, tg)
	}
	g.handler = g.routes()
	return g, nil
}

// fleets returns the gateways that serve a fleet: the tenants', or g.
func (g *Gateway) fleets() []*Gateway {
	if len(g.tenants) > 0 {
		return g.tenants
	}
	return []*Gateway{g}
}

// tenantSuffix is " of tenant <name>" for a tenant's gateway, for errors.
func (g *Gateway) tenantSuffix() string {
	if g.tenant == "" {
		return ""
	}
	return " of tenant " + g.tenant
}

// tenantOf returns the gateway of the tenant token is bound to, or nil.
// Every token of every tenant is compared, in constant time, whatever
// matches.
func (g *Gateway) tenantOf(token string) *Gateway {
	sum := sha256.Sum256([]byte(token))
	var found *Gateway
	for _, t := range g.tenants {
		for _, h := range t.tokens {
			if constantTimeEqual(sum, h) {
				found = t
			}
		}
	}
	return found
}

func constantTimeEqual(a, b [sha256.Size]byte) bool {
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}
