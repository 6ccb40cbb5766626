package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/tools/mcp"
	"github.com/lovia-fleet/lovia/pkg/toolsvc"
)

// fleetConn is how a process reaches its fleet for tool services: the
// subject prefix and a way to open a connection (nil: no tool services).
type fleetConn struct {
	prefix  string
	connect func(name string) (*nats.Conn, error)
}

// devConnect opens connections to lovia dev's embedded server.
func devConnect(url string) func(string) (*nats.Conn, error) {
	return func(name string) (*nats.Conn, error) { return nats.Connect(url, nats.Name("lovia dev "+name)) }
}

// remoteTools are the tools a process reaches outside itself: the agents
// file's MCP servers and the fleet's NATS tool services.
type remoteTools struct {
	mcp      *mcp.Manager
	services *toolsvc.Registry
	nc       *nats.Conn
}

// loadAgents reads the agents file and builds its catalog. When the file
// declares MCP servers and the process runs agents, it first starts one
// MCP manager for them (one connection per server for the whole process,
// shared by its workers and runs) so the catalog can check the tool names
// the agents select; when agents name tools of neither built-ins nor MCP
// servers (<service>__<tool>), it discovers the fleet's tool services. The
// caller stops both after its workers. A process that only lists agents
// (listOnly) starts neither.
func loadAgents(ctx context.Context, env *Env, path string, copts catalog.Options, listOnly bool, fc fleetConn, log *slog.Logger) (*catalog.Catalog, *remoteTools, error) {
	f, err := catalog.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	wrap := func(err error) error { return fmt.Errorf("agents file %s: %w", path, err) }
	servers, err := f.Servers()
	if err != nil {
		return nil, nil, wrap(err)
	}
	if listOnly {
		copts.MCPUnresolved = true
		cat, err := catalog.Build(f, copts)
		if err != nil {
			return nil, nil, wrap(err)
		}
		return cat, nil, nil
	}
	r := &remoteTools{}
	fail := func(err error) (*catalog.Catalog, *remoteTools, error) {
		r.stop(context.WithoutCancel(ctx))
		return nil, nil, err
	}
	if len(servers) > 0 {
		mgr, err := mcp.New(mcp.Config{Servers: servers, Logger: log, Getenv: env.Getenv})
		if err != nil {
			return nil, nil, wrap(err)
		}
		if err := mgr.Start(ctx); err != nil {
			return nil, nil, wrap(err)
		}
		r.mcp, copts.MCP = mgr, mgr
		log.Info("MCP servers connected", "servers", strings.Join(mgr.Servers(), ", "))
	}
	if namesServices(f, copts) && fc.connect != nil {
		nc, err := fc.connect("tool services")
		if err != nil {
			return fail(err)
		}
		r.nc = nc
		reg, err := toolsvc.NewRegistry(toolsvc.RegistryConfig{Conn: nc, Prefix: fc.prefix, Logger: log, Caller: toolsvc.CallerConfig{CallOf: callOf}})
		if err != nil {
			return fail(err)
		}
		if err := reg.Start(ctx); err != nil {
			return fail(fmt.Errorf("tool services: %w", err))
		}
		r.services, copts.Services = reg, reg
	}
	cat, err := catalog.Build(f, copts)
	if err != nil {
		return fail(wrap(err))
	}
	if r.mcp == nil && r.services == nil {
		return cat, nil, nil
	}
	return cat, r, nil
}

// namesServices reports whether an agent names a tool that is neither
// built in nor of a declared MCP server: one a tool service may provide.
func namesServices(f catalog.File, copts catalog.Options) bool {
	for _, a := range f.Agents {
		for _, n := range a.Tools {
			server, _, remote := strings.Cut(n, mcp.Separator)
			if !remote || copts.Tools[n] != nil {
				continue
			}
			if _, ok := f.MCPServers[server]; ok {
				continue
			}
			if _, ok := a.MCPServers[server]; ok {
				continue
			}
			return true
		}
	}
	return false
}

// callOf names the run, agent and call of a call in its tool-service
// headers (Lovia-Call-Id lets a service's dedupe answer a call made again
// after a crash instead of running it twice).
func callOf(ctx context.Context, rc *loop.RunContext) toolsvc.Call {
	if rc == nil {
		return toolsvc.Call{}
	}
	c := toolsvc.Call{RunID: rc.RunID}
	if tc, ok := loop.ToolCallFrom(ctx); ok {
		c.CallID = tc.ID
	}
	if a := rc.Agent(); a != nil {
		c.Agent = a.Name
	}
	return c
}

func (r *remoteTools) stop(ctx context.Context) error {
	if r == nil {
		return nil
	}
	var errs []error
	if r.services != nil {
		errs = append(errs, r.services.Stop(ctx))
	}
	if r.nc != nil {
		r.nc.Close()
	}
	if r.mcp != nil {
		errs = append(errs, r.mcp.Stop(ctx))
	}
	return errors.Join(errs...)
}

// stop ends what buildDeps started: the MCP servers and the tool-service
// discovery. Call it after the workers' Stop, so runs in flight keep
// their tools until they end.
func (d *fleetDeps) stop(ctx context.Context) error {
	if d.plugins != nil {
		defer d.plugins.Close()
	}
	return d.remote.stop(ctx)
}

// stopDeps stops deps on a fresh deadline, for a defer.
func stopDeps(d *fleetDeps) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = d.stop(ctx)
}
