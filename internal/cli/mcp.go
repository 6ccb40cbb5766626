package cli

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/tools/mcp"
)

// loadAgents reads the agents file and builds its catalog. When the file
// declares MCP servers and the process runs agents, it first starts one
// MCP manager for them (one connection per server for the whole process,
// shared by its workers and runs) so the catalog can check the tool names
// the agents select; the caller stops it after its workers. A process
// that only lists agents (listOnly) starts no server.
func loadAgents(ctx context.Context, env *Env, path string, copts catalog.Options, listOnly bool, log *slog.Logger) (*catalog.Catalog, *mcp.Manager, error) {
	f, err := catalog.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	servers, err := f.Servers()
	if err != nil {
		return nil, nil, fmt.Errorf("agents file %s: %w", path, err)
	}
	if len(servers) == 0 || listOnly {
		copts.MCPUnresolved = listOnly
		cat, err := catalog.Build(f, copts)
		if err != nil {
			return nil, nil, fmt.Errorf("agents file %s: %w", path, err)
		}
		return cat, nil, nil
	}
	mgr, err := mcp.New(mcp.Config{Servers: servers, Logger: log, Getenv: env.Getenv})
	if err != nil {
		return nil, nil, fmt.Errorf("agents file %s: %w", path, err)
	}
	if err := mgr.Start(ctx); err != nil {
		return nil, nil, fmt.Errorf("agents file %s: %w", path, err)
	}
	copts.MCP = mgr
	cat, err := catalog.Build(f, copts)
	if err != nil {
		_ = mgr.Stop(context.WithoutCancel(ctx))
		return nil, nil, fmt.Errorf("agents file %s: %w", path, err)
	}
	log.Info("MCP servers connected", "servers", strings.Join(mgr.Servers(), ", "))
	return cat, mgr, nil
}

// stop ends what buildDeps started: the MCP servers. Call it after the
// workers' Stop, so runs in flight keep their tools until they end.
func (d *fleetDeps) stop(ctx context.Context) error {
	if d.mcp == nil {
		return nil
	}
	return d.mcp.Stop(ctx)
}

// stopDeps stops deps on a fresh deadline, for a defer.
func stopDeps(d *fleetDeps) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = d.stop(ctx)
}
