package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Manager owns this process's MCP connections: one client session per
// server, shared by every run, supervised and restarted. Its methods are
// safe for concurrent use.
type Manager struct {
	cfg   Config
	conns map[string]*conn
	names []string

	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// New validates cfg and returns a manager that is not connected yet:
// [Manager.Start] connects.
func New(cfg Config) (*Manager, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	m := &Manager{cfg: cfg, conns: make(map[string]*conn, len(cfg.Servers)), names: sortedNames(cfg.Servers)}
	for _, name := range m.names {
		m.conns[name] = newConn(name, cfg.Servers[name], &m.cfg)
	}
	return m, nil
}

// Start connects to every server at once and lists its tools. It fails,
// stopping whatever it started, when a server cannot be reached within
// ConnectTimeout: an error names each failing server. After Start each
// server is supervised until [Manager.Stop]: a stdio server that exits is
// started again, a failed HTTP session is reconnected, with backoff.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started {
		return errors.New("mcp: Manager.Start called twice")
	}
	// The supervisors outlive Start's context: they end at Stop.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	results := make(map[string]chan error, len(m.conns))
	for _, name := range m.names {
		ch := make(chan error, 1)
		results[name] = ch
		c := m.conns[name]
		m.wg.Go(func() { c.run(runCtx, ch) })
	}
	var errs []error
	for _, name := range m.names {
		select {
		case err := <-results[name]:
			if err != nil {
				errs = append(errs, fmt.Errorf("MCP server %q: %w", name, err))
			}
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("MCP server %q: %w", name, context.Cause(ctx)))
		}
	}
	if len(errs) > 0 {
		cancel()
		m.wg.Wait()
		return errors.Join(errs...)
	}
	m.started, m.cancel = true, cancel
	return nil
}

// Stop closes every session (a stdio server's stdin is closed, then it is
// terminated if it does not exit) and waits for the supervisors, or for
// ctx.
func (m *Manager) Stop(ctx context.Context) error {
	m.mu.Lock()
	cancel := m.cancel
	m.cancel = nil
	m.mu.Unlock()
	if cancel == nil {
		return nil
	}
	for _, c := range m.conns {
		c.mu.Lock()
		c.stopped = true
		c.mu.Unlock()
	}
	cancel()
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("mcp: stop: %w", context.Cause(ctx))
	}
}

// Servers returns the server names, sorted.
func (m *Manager) Servers() []string { return append([]string(nil), m.names...) }

// ServerTools returns the server's current tools, named <server>__<tool>
// and sorted by name. The list is the one the server last reported: it
// changes when the server sends notifications/tools/list_changed or is
// reconnected. The tools call whichever session is current.
func (m *Manager) ServerTools(server string) ([]*loop.Tool, error) {
	c := m.conns[server]
	if c == nil {
		return nil, fmt.Errorf("%w %q (declared: %s)", ErrUnknownServer, server, strings.Join(m.names, ", "))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.connects == 0 {
		return nil, fmt.Errorf("%w: %q has not connected yet (call Manager.Start first)", ErrNotStarted, server)
	}
	return append([]*loop.Tool(nil), c.tools...), nil
}

// Status is a snapshot of one server's connection.
type Status struct {
	// Connected reports a live session.
	Connected bool
	// PID is the stdio server's process id while connected (0 for HTTP).
	PID int
	// Connects counts successful connects (1 + restarts).
	Connects int
	// Tools is the number of tools last listed.
	Tools int
	// LastError is why the server was last disconnected, if it was.
	LastError string
}

// Status reports the server's connection.
func (m *Manager) Status(server string) (Status, error) {
	c := m.conns[server]
	if c == nil {
		return Status{}, fmt.Errorf("%w %q (declared: %s)", ErrUnknownServer, server, strings.Join(m.names, ", "))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Status{Connected: c.session != nil, PID: c.pid, Connects: c.connects, Tools: len(c.tools)}
	if c.lastErr != nil {
		s.LastError = c.lastErr.Error()
	}
	return s, nil
}
