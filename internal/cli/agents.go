package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/provider"
	"github.com/lovia-fleet/lovia/pkg/registry"
	"github.com/lovia-fleet/lovia/pkg/tools"
)

const agentsUsage = `apply FILE [--prune] | check FILE | ls [--json] | get NAME [--revision N] | history NAME [--json] | rm NAME

The agents registry: agent definitions (the agents-file schema) in the
fleet's KV bucket, served by workers started with --registry. check
validates an agents file offline, with no NATS (the tools of MCP servers
and tool services are checked when a worker starts).`

// runAgents is `lovia agents`: the agents registry.
func runAgents(ctx context.Context, env *Env, args []string) int {
	fs := flagSet(env, "agents", agentsUsage)
	nf := addNATSFlags(fs, env)
	prune := fs.Bool("prune", false, "apply: delete the registry's agents the file does not define")
	revision := fs.Uint64("revision", 0, "get: the revision to show (default: the current one)")
	asJSON := fs.Bool("json", false, "ls, history: print JSON")
	pos, ok := parse(fs, args)
	if !ok {
		return ExitUsage
	}
	if code, ok := subcommand(env, fs, "agents", agentsUsage, pos,
		subcmd{"apply", 2}, subcmd{"check", 2}, subcmd{"ls", 1}, subcmd{"get", 2}, subcmd{"history", 2}, subcmd{"rm", 2}); !ok {
		return code
	}
	if pos[0] == "check" {
		names, err := checkAgentsFile(env, pos[1], ".")
		if err != nil {
			return fail(env.Stderr, err)
		}
		fmt.Fprintf(env.Stdout, "agents file %s is valid: %d agent%s (%s)\n", pos[1], len(names), plural(len(names)), strings.Join(names, ", "))
		return ExitOK
	}
	nc, err := nf.connect("agents")
	if err != nil {
		return fail(env.Stderr, err)
	}
	defer nc.Close()
	rctx, cancel := requestCtx(ctx)
	defer cancel()
	names, err := bus.NewNames(nf.prefix)
	if err != nil {
		return usageErr(env, fs, err.Error())
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fail(env.Stderr, err)
	}
	reg, err := registry.Ensure(rctx, js, names, 0)
	if err != nil {
		return fail(env.Stderr, err)
	}
	switch pos[0] {
	case "apply":
		return agentsApply(rctx, env, reg, js, names, pos[1], *prune)
	case "ls":
		return agentsList(rctx, env, reg, js, names, *asJSON)
	case "get":
		var e *registry.Entry
		if *revision != 0 {
			e, err = reg.GetRevision(rctx, pos[1], *revision)
		} else {
			e, err = reg.Get(rctx, pos[1])
		}
		if err != nil {
			return fail(env.Stderr, registryHint(err))
		}
		printJSON(env, e)
	case "history":
		h, err := reg.History(rctx, pos[1])
		if err != nil {
			return fail(env.Stderr, registryHint(err))
		}
		if *asJSON {
			printJSON(env, h)
		} else {
			printHistory(env.Stdout, h)
		}
	case "rm":
		if err := reg.Remove(rctx, pos[1]); err != nil {
			return fail(env.Stderr, registryHint(err))
		}
		fmt.Fprintf(env.Stdout, "removed agent %s (its runs in flight keep their pinned definition)\n", pos[1])
	}
	return ExitOK
}

func registryHint(err error) error {
	if errors.Is(err, registry.ErrNotFound) {
		return fmt.Errorf("%w (lovia agents ls lists the registry)", err)
	}
	return err
}

// agentsApply validates an agents file and writes its agents.
func agentsApply(ctx context.Context, env *Env, reg *registry.Registry, js jetstream.JetStream, names bus.Names, path string, prune bool) int {
	f, err := catalog.ReadFile(path)
	if err != nil {
		return fail(env.Stderr, err)
	}
	if len(f.MCPServers) > 0 {
		return fail(env.Stderr, fmt.Errorf("agents file %s declares mcp_servers: the registry holds agents only; declare the servers in the workers' agents file (lovia worker --agents), their tools can be named here", path))
	}
	ts, err := tools.Builtin(tools.Config{Workspace: "."})
	if err != nil {
		return fail(env.Stderr, err)
	}
	opts := catalog.Options{Tools: ts, Registry: provider.NewRegistry(provider.Config{Getenv: env.Getenv})}
	rep, err := reg.Apply(ctx, f.Agents, prune, opts)
	if err != nil {
		return fail(env.Stderr, fmt.Errorf("agents file %s: %w", path, err))
	}
	for _, group := range []struct {
		what  string
		names []string
	}{{"created", rep.Created}, {"updated", rep.Updated}, {"unchanged", rep.Unchanged}, {"deleted", rep.Deleted}} {
		for _, n := range group.names {
			fmt.Fprintf(env.Stdout, "%-9s %s\n", group.what, n)
		}
	}
	fmt.Fprintf(env.Stdout, "registry revision %d\n", rep.Revision)
	reportUnserved(ctx, env, js, names, f.Agents)
	return ExitOK
}

// unservedWait is how long agents apply waits for the registry's workers
// to announce the agents it applied: they rebuild within a second and
// announce at once, so an agent still unserved after it is one they
// left out (or no registry worker is up).
const unservedWait = 5 * time.Second

// reportUnserved says which agents no live worker serves, once the
// registry's workers had the time to pick them up: a worker started with
// --registry leaves out an agent whose tools or model it cannot provide.
func reportUnserved(ctx context.Context, env *Env, js jetstream.JetStream, names bus.Names, specs []catalog.Spec) {
	var missing []string
	deadline := time.Now().Add(unservedWait)
	for first := true; ; first = false {
		ms, ok := fleetMembers(ctx, js, names)
		if !ok {
			return
		}
		if first && len(ms) == 0 {
			deadline = time.Now() // no worker to wait for
		}
		served, _ := agentsOf(ms)
		missing = missing[:0]
		for _, s := range specs {
			if served[s.Name] == 0 {
				missing = append(missing, s.Name)
			}
		}
		if len(missing) == 0 || !time.Now().Before(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
	for _, n := range missing {
		fmt.Fprintf(env.Stderr, "lovia: no live worker serves agent %s: start a worker with --registry (its runs wait, queued), or check the worker logs for a tool or model it cannot provide\n", n)
	}
}
