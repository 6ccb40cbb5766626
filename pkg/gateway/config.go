package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/service"
)

// Defaults of Config.
const (
	DefaultAddr              = ":8080"
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultShutdownTimeout   = 10 * time.Second
	DefaultMaxBodyBytes      = 1 << 20
	DefaultHeartbeat         = 15 * time.Second
)

// MetricsRegistry is where the gateway registers its metrics and what
// GET /metrics serves. A *prometheus.Registry is one.
type MetricsRegistry interface {
	prometheus.Registerer
	prometheus.Gatherer
}

// Config configures a Gateway. Fields without a default are required; zero
// fields take the defaults WithDefaults documents.
type Config struct {
	// API answers the control operations (submit, status, approve, …) in
	// process; the gateway also serves it as the `lovia` NATS micro service
	// between Start and Stop. Required.
	API *service.API
	// Client tails runs' events for the SSE endpoints, and lists agents
	// over NATS when API has no catalog. Required.
	Client *client.Client
	// Conn is the NATS connection whose state GET /healthz reports; the
	// gateway also reads runs' last event seqs through it. Use the
	// connection API and Client were built on. Required.
	Conn *nats.Conn
	// Addr is the TCP address Start listens on ("host:port"; port 0 picks
	// a free one, see Gateway.Addr). Default ":8080".
	Addr string
	// Tokens are the accepted bearer tokens. Empty: no authentication.
	// With tokens, every route but GET /healthz and GET /metrics needs
	// "Authorization: Bearer <token>".
	Tokens []string
	// Tenants makes one gateway serve several tenants, each a fleet in its
	// own NATS account: a request's bearer token picks the tenant whose
	// API, client and connection answer it, so a tenant's token reaches
	// only that tenant's runs. With Tenants, API, Client, Conn and Tokens
	// stay empty (each tenant has its own).
	Tenants []Tenant
	// CORSOrigins are the origins ("https://app.example.com", or "*" for
	// any) whose browser pages may call the gateway: their requests get
	// CORS headers and their preflights are answered. Empty: no CORS
	// headers (same-origin pages and non-browser clients only).
	CORSOrigins []string
	// Logger receives logs. Default: discard.
	Logger *slog.Logger
	// Metrics registers the gateway's metrics and is served on
	// GET /metrics. Default: a new private registry (only the gateway's
	// metrics).
	Metrics MetricsRegistry
	// ReadHeaderTimeout bounds reading a request's headers. Default 10s.
	ReadHeaderTimeout time.Duration
	// WriteTimeout bounds writing one response, and each event of an SSE
	// stream (a client that stops reading is dropped). Default 30s.
	WriteTimeout time.Duration
	// IdleTimeout closes keep-alive connections idle this long. Default 2m.
	IdleTimeout time.Duration
	// ShutdownTimeout bounds Stop when its context has no deadline: requests
	// still running then are cut off. Default 10s.
	ShutdownTimeout time.Duration
	// MaxBodyBytes caps a request body; larger ones get 413. Default 1 MiB.
	MaxBodyBytes int64
	// Heartbeat is the interval of silence after which an SSE stream gets
	// a comment line, so proxies and clients keep it open. Default 15s.
	Heartbeat time.Duration
}

// Tenant is one tenant of a gateway that serves several (Config.Tenants):
// its fleet's API, client and connection, in the tenant's own NATS
// account, and the bearer tokens bound to it.
type Tenant struct {
	// Name labels the tenant in metrics, logs and /healthz: letters,
	// digits, '-' and '_'. Required, unique.
	Name string
	// Tokens are the bearer tokens bound to the tenant. At least one; a
	// token is bound to one tenant only.
	Tokens []string
	// API, Client and Conn are as in Config, for the tenant's account.
	// Give them, or Open.
	API    *service.API
	Client *client.Client
	Conn   *nats.Conn
	// Open, instead of API, Client and Conn, opens the tenant's fleet
	// once the gateway has started, in the background, so that a tenant
	// whose NATS is out of reach does not keep the gateway from serving
	// the others. Until it returns, the tenant's requests are answered
	// 503 Unavailable and GET /readyz reports the tenant "starting". A
	// failure is logged and Open called again TenantOpenRetry later, the
	// pause doubling up to a minute; ctx ends when the gateway stops.
	Open func(ctx context.Context) (TenantFleet, error)
}

// TenantFleet is what Tenant.Open opens: a tenant's API, client and
// connection, as in Config.
type TenantFleet struct {
	API    *service.API
	Client *client.Client
	Conn   *nats.Conn
}

// TenantOpenRetry is the pause after a Tenant.Open that failed first;
// it doubles after each failure, up to maxTenantOpenRetry.
const TenantOpenRetry = 5 * time.Second

const maxTenantOpenRetry = time.Minute

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Metrics == nil {
		c.Metrics = prometheus.NewRegistry()
	}
	c.ReadHeaderTimeout = orDefault(c.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	c.WriteTimeout = orDefault(c.WriteTimeout, DefaultWriteTimeout)
	c.IdleTimeout = orDefault(c.IdleTimeout, DefaultIdleTimeout)
	c.ShutdownTimeout = orDefault(c.ShutdownTimeout, DefaultShutdownTimeout)
	c.MaxBodyBytes = orDefault(c.MaxBodyBytes, DefaultMaxBodyBytes)
	c.Heartbeat = orDefault(c.Heartbeat, DefaultHeartbeat)
	return c
}

func orDefault[T time.Duration | int64](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// validate names the first bad field of a config WithDefaults returned.
func (c Config) validate() error {
	if len(c.Tenants) > 0 {
		if err := c.validateTenants(); err != nil {
			return err
		}
	} else if err := c.validateFleet(); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return configError("Addr", "%q is not host:port: %v", c.Addr, err)
	}
	for i, o := range c.CORSOrigins {
		if err := validOrigin(o); err != nil {
			return configError(fmt.Sprintf("CORSOrigins[%d]", i), "%v", err)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"ReadHeaderTimeout", c.ReadHeaderTimeout}, {"WriteTimeout", c.WriteTimeout}, {"IdleTimeout", c.IdleTimeout},
		{"ShutdownTimeout", c.ShutdownTimeout}, {"Heartbeat", c.Heartbeat},
	} {
		if d.v < 0 {
			return configError(d.name, "must not be negative")
		}
	}
	if c.MaxBodyBytes < 0 {
		return configError("MaxBodyBytes", "must not be negative")
	}
	return nil
}

// validateFleet checks the fields of a gateway that serves one fleet.
func (c Config) validateFleet() error {
	switch {
	case c.API == nil:
		return configError("API", "is required (service.NewAPI)")
	case c.Client == nil:
		return configError("Client", "is required (client.New)")
	case c.Conn == nil:
		return configError("Conn", "is required (the NATS connection of API and Client)")
	}
	for i, t := range c.Tokens {
		if t == "" {
			return configError(fmt.Sprintf("Tokens[%d]", i), "must not be empty")
		}
	}
	return nil
}

// validateTenants checks the fields of a gateway that serves several
// tenants.
func (c Config) validateTenants() error {
	switch {
	case c.API != nil || c.Client != nil || c.Conn != nil:
		return configError("Tenants", "each tenant has its own API, Client and Conn: leave Config.API, Client and Conn empty")
	case len(c.Tokens) > 0:
		return configError("Tokens", "with Tenants, tokens are bound to a tenant: move them to Tenant.Tokens")
	}
	names := map[string]bool{}
	tokens := map[string]string{}
	for i, t := range c.Tenants {
		field := fmt.Sprintf("Tenants[%d]", i)
		switch {
		case !ValidTenantName(t.Name):
			return configError(field+".Name", "%q is not a tenant name: use letters, digits, '-' and '_'", t.Name)
		case names[t.Name]:
			return configError(field+".Name", "tenant %q is listed twice", t.Name)
		case t.Open != nil && (t.API != nil || t.Client != nil || t.Conn != nil):
			return configError(field+".Open", "opens the tenant's API, Client and Conn: give Open or them, not both")
		case t.Open == nil && t.API == nil:
			return configError(field+".API", "is required (service.NewAPI on the tenant's connection), or Open")
		case t.Open == nil && t.Client == nil:
			return configError(field+".Client", "is required (client.New on the tenant's connection)")
		case t.Open == nil && t.Conn == nil:
			return configError(field+".Conn", "is required (the tenant's NATS connection)")
		case len(t.Tokens) == 0:
			return configError(field+".Tokens", "tenant %q needs at least one token: without one, no request could reach it", t.Name)
		}
		names[t.Name] = true
		for j, tok := range t.Tokens {
			if tok == "" {
				return configError(fmt.Sprintf("%s.Tokens[%d]", field, j), "must not be empty")
			}
			if other, ok := tokens[tok]; ok {
				return configError(fmt.Sprintf("%s.Tokens[%d]", field, j), "the token is already bound to tenant %q: a token reaches one tenant only", other)
			}
			tokens[tok] = t.Name
		}
	}
	return nil
}

// ValidTenantName reports whether s may name a [Tenant]: 1 to 64 letters,
// digits, '-' and '_'.
func ValidTenantName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}
