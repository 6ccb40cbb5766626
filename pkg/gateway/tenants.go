package gateway

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// noTenant labels the metrics of requests that reached no tenant (refused
// tokens, /healthz, /metrics) on a gateway that serves tenants.
const noTenant = "none"

// newTenants builds a gateway that serves cfg.Tenants: one gateway per
// tenant, each on its tenant's API, client and connection with its
// metrics labelled tenant="<name>", behind one handler that picks the
// tenant by the bearer token. A tenant with Open is a placeholder until
// Start has opened it (openTenants).
func newTenants(cfg Config) (*Gateway, error) {
	top := cfg
	top.Tenants = nil
	m, err := newMetrics(prometheus.WrapRegistererWith(prometheus.Labels{"tenant": noTenant}, cfg.Metrics))
	if err != nil {
		return nil, err
	}
	g := &Gateway{cfg: top, log: cfg.Logger, m: m, stopped: make(chan struct{}), opens: cfg.Tenants}
	for _, o := range cfg.CORSOrigins {
		g.origins = append(g.origins, normalizeOrigin(o))
	}
	g.drain, g.drainStop = context.WithCancel(context.Background())
	for _, t := range cfg.Tenants {
		var tg *Gateway
		if t.Open != nil {
			tg, err = g.placeholder(t)
		} else {
			tg, err = g.newTenant(t, TenantFleet{API: t.API, Client: t.Client, Conn: t.Conn})
		}
		if err != nil {
			return nil, err
		}
		g.tenants = append(g.tenants, tg)
	}
	g.handler = g.routes()
	return g, nil
}

// tenantConfig is the config of tenant t's gateway, on fleet f.
func (g *Gateway) tenantConfig(t Tenant, f TenantFleet) Config {
	tc := g.cfg
	tc.API, tc.Client, tc.Conn, tc.Tokens = f.API, f.Client, f.Conn, t.Tokens
	tc.Logger = g.cfg.Logger.With("tenant", t.Name)
	return tc
}

// tenantMetrics is where tenant t's gateway registers its metrics.
func (g *Gateway) tenantMetrics(t Tenant) prometheus.Registerer {
	return prometheus.WrapRegistererWith(prometheus.Labels{"tenant": t.Name}, g.cfg.Metrics)
}

// newTenant builds the gateway of tenant t on its fleet f.
func (g *Gateway) newTenant(t Tenant, f TenantFleet) (*Gateway, error) {
	tg, err := newFleet(g.tenantConfig(t, f), g.tenantMetrics(t))
	if err != nil {
		return nil, err
	}
	tg.tenant = t.Name
	tg.drain = g.drain                  // Stop ends every tenant's event streams
	tg.handler = tg.traced(tg.routes()) // tracing.go
	return tg, nil
}

// placeholder is the gateway of a tenant not opened yet: it holds the
// tenant's tokens and metrics, and answers its requests 503 (natsDown).
func (g *Gateway) placeholder(t Tenant) (*Gateway, error) {
	m, err := newMetrics(g.tenantMetrics(t))
	if err != nil {
		return nil, err
	}
	return &Gateway{cfg: g.tenantConfig(t, TenantFleet{}), log: g.cfg.Logger.With("tenant", t.Name), m: m, tenant: t.Name,
		drain: g.drain, stopped: make(chan struct{}), openErr: &atomic.Pointer[string]{}, tokens: tokenSums(t.Tokens)}, nil
}

// opening reports whether g is the placeholder of a tenant not opened
// yet.
func (g *Gateway) opening() bool { return g.openErr != nil }

// openTenants opens, in the background, the tenants given with Open
// (Start calls it); Stop cancels and waits for them.
func (g *Gateway) openTenants() {
	ctx, cancel := context.WithCancel(context.Background())
	g.openStop = cancel
	for i, t := range g.opens {
		if t.Open == nil {
			continue
		}
		g.openWG.Add(1)
		go g.openTenant(ctx, i, t)
	}
}

// openTenant calls t.Open until it succeeds or ctx ends, and puts the
// tenant's gateway, its micro service started, in the placeholder's place.
func (g *Gateway) openTenant(ctx context.Context, i int, t Tenant) {
	defer g.openWG.Done()
	ph := g.fleets()[i]
	pause := TenantOpenRetry
	for {
		err := g.attach(ctx, i, t)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			return
		}
		msg := err.Error()
		ph.openErr.Store(&msg)
		g.log.Error("gateway: opening the tenant's fleet failed; retrying", "tenant", t.Name, "error", err, "retry_in", pause)
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, maxTenantOpenRetry)
	}
}

// attach opens tenant t and serves it in place i.
func (g *Gateway) attach(ctx context.Context, i int, t Tenant) error {
	f, err := t.Open(ctx)
	if err != nil {
		return err
	}
	if f.API == nil || f.Client == nil || f.Conn == nil {
		return errors.New("Tenant.Open returned no API, Client or Conn")
	}
	tg, err := g.newTenant(t, f)
	if err != nil {
		return err
	}
	if err := tg.cfg.API.WarmRunIndex(ctx); err != nil {
		g.log.Warn("gateway: the run index did not start; the first listing starts it", "error", err, "tenant", t.Name)
	}
	if err := tg.svc.Start(ctx); err != nil {
		return fmt.Errorf("start the lovia micro service of tenant %s: %w", t.Name, err)
	}
	g.tmu.Lock()
	g.tenants[i] = tg
	g.tmu.Unlock()
	g.log.Info("gateway: serving the tenant", "tenant", t.Name)
	return nil
}

// fleets returns the gateways that serve a fleet: the tenants' (some
// perhaps placeholders), or g.
func (g *Gateway) fleets() []*Gateway {
	if len(g.tenants) > 0 {
		g.tmu.RLock()
		defer g.tmu.RUnlock()
		return slices.Clone(g.tenants)
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
	for _, t := range g.fleets() {
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
