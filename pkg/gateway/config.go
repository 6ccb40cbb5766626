package gateway

import (
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
	// With tokens, every route but GET /healthz needs
	// "Authorization: Bearer <token>".
	Tokens []string
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
	switch {
	case c.API == nil:
		return configError("API", "is required (service.NewAPI)")
	case c.Client == nil:
		return configError("Client", "is required (client.New)")
	case c.Conn == nil:
		return configError("Conn", "is required (the NATS connection of API and Client)")
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return configError("Addr", "%q is not host:port: %v", c.Addr, err)
	}
	for i, t := range c.Tokens {
		if t == "" {
			return configError(fmt.Sprintf("Tokens[%d]", i), "must not be empty")
		}
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
