package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// EmbeddedConfig configures an in-process NATS server with JetStream.
type EmbeddedConfig struct {
	// StoreDir is the JetStream store directory. Required.
	StoreDir string
	// Host is the listen address. Default "127.0.0.1".
	Host string
	// Port is the client port: 0 picks a random free port, -1 listens on
	// nothing (in-process connections only). Default 0.
	Port int
	// ServerName names the server. Default "lovia-embedded".
	ServerName string
	// MaxPayload is the largest message the server accepts, in bytes.
	// Default the server's (1 MiB).
	MaxPayload int32
	// ReadyTimeout bounds the wait for the server to accept connections.
	// Default 10s.
	ReadyTimeout time.Duration
	// Cluster joins a cluster: its name, this node's route listen port and
	// the routes to the other nodes. Leave empty for a single server.
	ClusterName string
	ClusterPort int
	Routes      []string
}

// Embedded is a running in-process NATS server.
type Embedded struct {
	srv *server.Server
}

// WithDefaults returns c with every zero field set to its default.
func (c EmbeddedConfig) WithDefaults() EmbeddedConfig {
	if c.Host == "" {
		c.Host = "127.0.0.1"
	}
	if c.ServerName == "" {
		c.ServerName = "lovia-embedded"
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = 10 * time.Second
	}
	return c
}

func (c EmbeddedConfig) validate() error {
	switch {
	case c.StoreDir == "":
		return configError("StoreDir", "is required")
	case c.Port < -1 || c.Port > 65535:
		return configError("Port", "%d is not -1, 0 or a port", c.Port)
	case c.ReadyTimeout < 0:
		return configError("ReadyTimeout", "must not be negative")
	case c.ClusterName != "" && c.Port == -1:
		return configError("Port", "a cluster node must listen: routes never start without a client listener (nats-server #5174)")
	}
	return nil
}

// StartEmbedded starts a NATS server with JetStream enabled and waits until
// it accepts connections.
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	opts := &server.Options{
		ServerName: cfg.ServerName,
		Host:       cfg.Host,
		Port:       cfg.Port,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		NoLog:      true,
		NoSigs:     true,
		MaxPayload: cfg.MaxPayload,
	}
	switch cfg.Port {
	case 0:
		opts.Port = server.RANDOM_PORT
	case -1:
		opts.DontListen = true
		opts.Port = server.RANDOM_PORT
	}
	if cfg.ClusterName != "" {
		opts.Cluster = server.ClusterOpts{Name: cfg.ClusterName, Host: cfg.Host, Port: cfg.ClusterPort}
		for _, r := range cfg.Routes {
			u, err := parseRoute(r)
			if err != nil {
				return nil, err
			}
			opts.Routes = append(opts.Routes, u)
		}
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("broker: embedded server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(cfg.ReadyTimeout) {
		srv.Shutdown()
		return nil, fmt.Errorf("broker: embedded server: not ready after %s (is port %d in use?)", cfg.ReadyTimeout, cfg.Port)
	}
	return &Embedded{srv: srv}, nil
}

// ClientURL is the URL clients connect to. A server started with Port -1
// listens on nothing: connect with [Embedded.Connect] instead.
func (e *Embedded) ClientURL() string { return e.srv.ClientURL() }

// Server returns the underlying server.
func (e *Embedded) Server() *server.Server { return e.srv }

// Connect opens a client connection: over the network when the server
// listens, else in-process.
func (e *Embedded) Connect(opts ...nats.Option) (*nats.Conn, error) {
	opts = append([]nats.Option{nats.InProcessServer(e.srv)}, opts...)
	return nats.Connect("", opts...)
}

// Shutdown stops the server and waits until it has stopped or ctx ends.
func (e *Embedded) Shutdown(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		e.srv.Shutdown()
		e.srv.WaitForShutdown()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("broker: embedded server shutdown: %w", ctx.Err())
	}
}
