package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/tools"
	"github.com/lovia-fleet/lovia/pkg/tools/mcp"
	"github.com/lovia-fleet/lovia/pkg/toolsvc"
)

// toolListing is what `lovia tools --json` prints.
type toolListing struct {
	Builtin  []toolEntry    `json:"builtin"`
	MCP      []mcpListing   `json:"mcp"`
	Services []serviceEntry `json:"services"`
	Errors   []string       `json:"errors,omitempty"`
}

type toolEntry struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

type mcpListing struct {
	Server string      `json:"server"`
	Tools  []toolEntry `json:"tools"`
}

type serviceEntry struct {
	Name      string      `json:"name"`
	Version   string      `json:"version"`
	Instances int         `json:"instances"`
	Tools     []toolEntry `json:"tools"`
}

func entries(ts []*loop.Tool) []toolEntry {
	out := make([]toolEntry, 0, len(ts))
	for _, t := range ts {
		s := t.Schema()
		out = append(out, toolEntry{Name: s.Name, Description: s.Description, Parameters: s.Parameters})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// runTools lists the tools a fleet can use: the built-in ones, the tools
// of the agents file's MCP servers (started for the listing, then
// stopped) and the NATS tool services running on the fleet.
func runTools(ctx context.Context, env *Env, args []string) int {
	fs := flagSet(env, "tools", "[--nats URL] [--agents FILE] [--json]")
	nf := addNATSFlags(fs, env)
	agents := fs.String("agents", "", "agents file whose MCP servers to list")
	asJSON := fs.Bool("json", false, "print JSON with the tools' schemas")
	if _, ok := parse(fs, args); !ok {
		return ExitUsage
	}
	var l toolListing
	ts, err := tools.Builtin(tools.Config{Workspace: "workspace"})
	if err != nil {
		return fail(env.Stderr, err)
	}
	builtin := make([]*loop.Tool, 0, len(ts))
	for _, n := range ts.Names() {
		builtin = append(builtin, ts[n])
	}
	// Built per agent from its http: section; the schemas are the same.
	builtin = append(builtin, tools.HTTPRequest(tools.HTTPPolicy{}), tools.ReadPage(tools.HTTPPolicy{}))
	l.Builtin = entries(builtin)

	if *agents != "" {
		if _, err := checkAgentsFile(env, *agents, "workspace"); err != nil {
			return fail(env.Stderr, err)
		}
		f, err := catalog.ReadFile(*agents)
		if err != nil {
			return fail(env.Stderr, err)
		}
		servers, err := f.Servers()
		if err != nil {
			return fail(env.Stderr, fmt.Errorf("agents file %s: %w", *agents, err))
		}
		if len(servers) > 0 {
			mgr, err := mcp.New(mcp.Config{Servers: servers, Getenv: env.Getenv})
			if err != nil {
				return fail(env.Stderr, err)
			}
			if err := mgr.Start(ctx); err != nil {
				return fail(env.Stderr, fmt.Errorf("agents file %s: %w", *agents, err))
			}
			for _, name := range mgr.Servers() {
				st, _ := mgr.ServerTools(name)
				l.MCP = append(l.MCP, mcpListing{Server: name, Tools: entries(st)})
			}
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
			_ = mgr.Stop(sctx)
			cancel()
		}
	}

	if nc, err := nf.connect("tools"); err != nil {
		l.Errors = append(l.Errors, "tool services not listed: "+err.Error())
	} else {
		found, err := toolsvc.Discover(ctx, nc, nf.prefix, 0)
		nc.Close()
		if err != nil {
			l.Errors = append(l.Errors, "tool services not listed: "+err.Error())
		}
		for _, si := range found {
			var st []*loop.Tool
			for _, ti := range si.Tools {
				st = append(st, &loop.Tool{Name: ti.Name, Description: ti.Description, Parameters: ti.Schema})
			}
			l.Services = append(l.Services, serviceEntry{Name: si.Name, Version: si.Version, Instances: si.Instances, Tools: entries(st)})
		}
	}

	if *asJSON {
		printJSON(env, l)
	} else {
		printTools(env, l)
	}
	for _, e := range l.Errors {
		fmt.Fprintln(env.Stderr, "lovia:", e)
	}
	return ExitOK
}

func printTools(env *Env, l toolListing) {
	w := env.Stdout
	section := func(title string, ts []toolEntry) {
		fmt.Fprintln(w, title)
		if len(ts) == 0 {
			fmt.Fprintln(w, "  (no tools)")
		}
		for _, t := range ts {
			fmt.Fprintf(w, "  %-40s %s\n", t.Name, firstLine(t.Description))
		}
	}
	section("built-in", l.Builtin)
	for _, m := range l.MCP {
		section("MCP server "+m.Server, m.Tools)
	}
	for _, s := range l.Services {
		section(fmt.Sprintf("tool service %s %s (%d instance%s)", s.Name, s.Version, s.Instances, plural(s.Instances)), s.Tools)
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
