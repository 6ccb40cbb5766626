package cli

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/provider"
	"github.com/lovia-fleet/lovia/pkg/registry"
	"github.com/lovia-fleet/lovia/pkg/tools"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// registryAgents is what a worker serves: with --registry, the agents
// registry (seeded from --agents when given), followed until ctx ends, and
// no catalog of its own for the API (it validates agents against the live
// fleet); without, the agents file (nil source) and its catalog.
func registryAgents(ctx context.Context, js jetstream.JetStream, names bus.Names, wf *workerFlags, deps *fleetDeps, log *slog.Logger) (worker.AgentSource, *catalog.Catalog, error) {
	if !wf.registry {
		if wf.serve != "" {
			return nil, nil, fmt.Errorf("--serve selects agents of the registry: add --registry")
		}
		return nil, deps.catalog, nil
	}
	reg, err := registry.Ensure(ctx, js, names, wf.replicas)
	if err != nil {
		return nil, nil, err
	}
	ts, err := tools.Builtin(tools.Config{Workspace: wf.workspace})
	if err != nil {
		return nil, nil, err
	}
	opts := catalog.Options{Tools: ts, Registry: deps.registry, Plugins: catalog.PluginStores{JetStream: js, Names: names, Replicas: wf.replicas, Logger: log},
		Compaction: compactionPolicies(ctx, js, names, wf.replicas, log)}
	if deps.remote != nil {
		if deps.remote.mcp != nil {
			opts.MCP = deps.remote.mcp
		}
		if deps.remote.services != nil {
			opts.Services = deps.remote.services
		}
	}
	if wf.agents != "" {
		f, err := catalog.ReadFile(wf.agents)
		if err != nil {
			return nil, nil, err
		}
		rep, err := reg.Apply(ctx, f.Agents, false, opts)
		if err != nil {
			return nil, nil, fmt.Errorf("seeding the agents registry from %s: %w", wf.agents, err)
		}
		log.Info("agents registry seeded from the agents file", "file", wf.agents, "created", rep.Created, "updated", rep.Updated, "revision", rep.Revision)
	}
	var serve []string
	for _, p := range strings.Split(wf.serve, ",") {
		if p = strings.TrimSpace(p); p != "" {
			if _, err := path.Match(p, ""); err != nil {
				return nil, nil, fmt.Errorf("--serve %q: %w: give comma-separated agent names or globs, e.g. 'support,billing-*'", p, err)
			}
			serve = append(serve, p)
		}
	}
	src := registry.NewSource(reg, opts, serve, log)
	if err := src.Start(ctx); err != nil {
		return nil, nil, fmt.Errorf("agents registry: %w", err)
	}
	return withCode(src, deps.codeAgents(), log), nil, nil
}

// codeAgents are the program's code agents (nil without).
func (d *fleetDeps) codeAgents() *catalog.Catalog {
	if d.code == nil {
		return nil
	}
	return d.code.Agents
}

// codeDeps are the program's dependencies (nil without).
func (d *fleetDeps) codeDeps() any {
	if d.code == nil {
		return nil
	}
	return d.code.Deps
}

// builtinTools is the built-in tool set (for validating agents applied to
// the registry: only the names matter).
func builtinTools(workspace string) tools.Set {
	ts, _ := tools.Builtin(tools.Config{Workspace: workspace})
	return ts
}

// agentOptions are the options agents applied through a gateway's API are
// validated with.
func agentOptions(env *Env) catalog.Options {
	return catalog.Options{Tools: builtinTools("."), Registry: provider.NewRegistry(provider.Config{Getenv: env.Getenv})}
}
