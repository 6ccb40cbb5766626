package toolsvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// DefaultRefresh is how often a [Registry] discovers the services again.
const DefaultRefresh = 10 * time.Second

// RegistryConfig configures a [Registry].
type RegistryConfig struct {
	// Conn is the NATS connection (required).
	Conn *nats.Conn
	// Prefix is the fleet's subject prefix (default "lovia").
	Prefix string
	// Caller configures the calls (its Conn defaults to Conn).
	Caller CallerConfig
	// Refresh is how often services are discovered again, so services
	// that start or stop are seen (default 10s).
	Refresh time.Duration
	// Wait is how long one discovery collects answers (default 300ms).
	Wait time.Duration
	// Logger receives services that appear and vanish (default: discard).
	Logger *slog.Logger
}

// Registry keeps the tool services of a fleet, discovered at Start and
// every Refresh after, and their tools as loop tools. A service that
// vanished keeps its tools (their calls fail with [ErrNoService] until an
// instance is back), so a run never loses a tool silently. It implements
// the catalog's tool source. Its methods are safe for concurrent use.
type Registry struct {
	cfg RegistryConfig

	mu       sync.Mutex
	services map[string]ServiceInfo
	tools    map[string][]*loop.Tool
	cancel   context.CancelFunc
	done     chan struct{}
}

// NewRegistry validates cfg; [Registry.Start] discovers.
func NewRegistry(cfg RegistryConfig) (*Registry, error) {
	if cfg.Conn == nil {
		return nil, errors.New("toolsvc: RegistryConfig.Conn is required")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.Caller.Conn == nil {
		cfg.Caller.Conn = cfg.Conn
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = DefaultRefresh
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Registry{cfg: cfg, services: map[string]ServiceInfo{}, tools: map[string][]*loop.Tool{}}, nil
}

// Start discovers the services once, then again every Refresh until Stop.
func (r *Registry) Start(ctx context.Context) error {
	r.mu.Lock()
	if r.cancel != nil {
		r.mu.Unlock()
		return errors.New("toolsvc: Registry.Start called twice")
	}
	r.mu.Unlock()
	if err := r.Refresh(ctx); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	r.mu.Lock()
	r.cancel, r.done = cancel, done
	r.mu.Unlock()
	go func() {
		defer close(done)
		t := time.NewTicker(r.cfg.Refresh)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
				if err := r.Refresh(runCtx); err != nil && runCtx.Err() == nil {
					r.cfg.Logger.Warn("tool service discovery failed", "error", err)
				}
			}
		}
	}()
	return nil
}

// Stop ends the refreshes.
func (r *Registry) Stop(ctx context.Context) error {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.cancel = nil
	r.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Refresh discovers the services now.
func (r *Registry) Refresh(ctx context.Context) error {
	found, err := Discover(ctx, r.cfg.Conn, r.cfg.Prefix, r.cfg.Wait)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	for _, si := range found {
		seen[si.Name] = true
		prev, known := r.services[si.Name]
		if !known || prev.Instances == 0 {
			r.cfg.Logger.Info("tool service available", "service", si.Name, "instances", si.Instances, "tools", len(si.Tools))
		}
		if !known || !sameTools(prev.Tools, si.Tools) {
			var tools []*loop.Tool
			for _, ti := range si.Tools {
				t, err := Tool(r.cfg.Caller, ti)
				if err != nil {
					r.cfg.Logger.Warn("tool service tool left out", "tool", ti.Name, "error", err)
					continue
				}
				tools = append(tools, t)
			}
			r.tools[si.Name] = tools
		}
		r.services[si.Name] = si
	}
	for name, si := range r.services {
		if !seen[name] && si.Instances > 0 {
			si.Instances = 0
			r.services[name] = si
			r.cfg.Logger.Warn("tool service vanished: its calls fail until an instance is back", "service", name)
		}
	}
	return nil
}

func sameTools(a, b []ToolInfo) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Subject != b[i].Subject || a[i].Description != b[i].Description || string(a[i].Schema) != string(b[i].Schema) {
			return false
		}
	}
	return true
}

// Services returns the services seen, sorted by name; Instances is 0 for
// a service that vanished.
func (r *Registry) Services() []ServiceInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]ServiceInfo, 0, len(r.services))
	for _, si := range r.services {
		out = append(out, si)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Has reports whether the service was seen.
func (r *Registry) Has(service string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.services[service]
	return ok
}

// ServerTools returns the service's tools, named <service>__<tool>.
func (r *Registry) ServerTools(service string) ([]*loop.Tool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	tools, ok := r.tools[service]
	if !ok {
		names := make([]string, 0, len(r.services))
		for n := range r.services {
			names = append(names, n)
		}
		sort.Strings(names)
		known := strings.Join(names, ", ")
		if known == "" {
			known = "none"
		}
		return nil, fmt.Errorf("no tool service %q is running (running: %s)", service, known)
	}
	return append([]*loop.Tool(nil), tools...), nil
}
