package mcp_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/tools/mcp"
)

// start starts a manager for servers and stops it at the end of the test.
func start(t *testing.T, cfg mcp.Config) *mcp.Manager {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	m, err := mcp.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, m.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, m.Stop(ctx))
	})
	return m
}

// tool returns the named tool of server.
func tool(t *testing.T, m *mcp.Manager, server, name string) *loop.Tool {
	t.Helper()
	ts, err := m.ServerTools(server)
	require.NoError(t, err)
	var names []string
	for _, tl := range ts {
		if tl.Name == name {
			return tl
		}
		names = append(names, tl.Name)
	}
	t.Fatalf("no tool %s among %v", name, names)
	return nil
}

func call(t *testing.T, tl *loop.Tool, args any) (any, error) {
	t.Helper()
	b, err := json.Marshal(args)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return tl.Func(ctx, nil, b)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// recorder is a slog handler that keeps the messages it sees.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Message)
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }
func (r *recorder) saw(msg string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.msgs {
		if m == msg {
			return true
		}
	}
	return false
}
