package catalog

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/tools"
	"github.com/lovia-fleet/lovia/pkg/tools/mcp"
)

// ToolSource provides the current tools of the agents file's MCP servers;
// an [mcp.Manager] started for [File.Servers] is one. The catalog calls it
// when it builds (to check the names agents select) and when each run
// starts (so a run sees the tools the server last listed). It must be safe
// for concurrent use and cheap.
type ToolSource interface {
	// ServerTools returns the server's tools, named <server>__<tool>.
	ServerTools(server string) ([]*loop.Tool, error)
}

// Servers returns every MCP server the file declares, shared and per
// agent, checked: names are unique in the file (a worker keeps one
// connection per name) and each declaration can work.
func (f File) Servers() (map[string]mcp.Server, error) {
	out := map[string]mcp.Server{}
	owner := map[string]string{}
	var errs []error
	add := func(where, name string, s MCPServer) {
		if err := mcp.ValidateServerName(name); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			return
		}
		if prev, dup := owner[name]; dup {
			errs = append(errs, fmt.Errorf("%s: MCP server %q is already declared by %s: declare it once under the top-level mcp_servers to share it", where, name, prev))
			return
		}
		srv := mcp.Server(s)
		if err := srv.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s: MCP server %q %w", where, name, err))
			return
		}
		owner[name], out[name] = where, srv
	}
	for _, name := range sortedKeys(f.MCPServers) {
		add("mcp_servers", name, f.MCPServers[name])
	}
	for i, a := range f.Agents {
		where := fmt.Sprintf("agents[%d]", i)
		if a.Name != "" {
			where = fmt.Sprintf("agent %q", a.Name)
		}
		for _, name := range sortedKeys(a.MCPServers) {
			add(where, name, a.MCPServers[name])
		}
	}
	return out, errors.Join(errs...)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ServiceSource provides the tools of the fleet's NATS tool services (a
// toolsvc.Registry): agents name them <service>__<tool> like MCP tools.
type ServiceSource interface {
	ToolSource
	// Has reports whether the service is known.
	Has(service string) bool
}

// selection is what an agent's `tools:` and `approval:` pick.
type selection struct {
	builtin []*loop.Tool
	remote  []remoteSel // MCP and tool-service tools, in file order
}

// remoteSel is an exact name or a glob of the tools of one MCP server or
// tool service; source is nil when names are not resolved.
type remoteSel struct {
	pattern string
	source  ToolSource
	// deferred: a tool service not running at start-up, resolved when a
	// run starts.
	deferred bool
}

// selectTools resolves an agent's tools: built-in names, and MCP tools by
// exact name or glob (github__*) on the servers the agent sees. With a
// source, every MCP name must match a tool the server lists now.
func selectTools(s Spec, visible []string, opts Options) (*selection, error) {
	sel := &selection{}
	seen := map[string]bool{}
	for _, n := range s.Tools {
		if t := opts.Tools[n]; t != nil {
			sel.builtin = append(sel.builtin, t)
			continue
		}
		server, _, isMCP := strings.Cut(n, mcp.Separator)
		if !isMCP {
			if strings.ContainsAny(n, "*?[") {
				return nil, fmt.Errorf("tool pattern %q: patterns select MCP tools only (e.g. github__*)", n)
			}
			return nil, unknownTool(n, visible, opts.Tools)
		}
		var (
			src      ToolSource
			kind     = "MCP server"
			deferred bool
		)
		switch {
		case contains(visible, server):
			src = opts.MCP
		case opts.Services != nil && opts.Services.Has(server):
			src, kind = opts.Services, "tool service"
		case opts.Services != nil:
			// A typo of a declared MCP server is not a tool service that
			// is not up yet: every run of the agent would fail.
			if near := nearest(server, visible); near != "" {
				return nil, fmt.Errorf("unknown tool %q: %q is not an MCP server of the agents file (declared: %s) nor a running tool service; did you mean %s%s%s? (if %q is a tool service, start it before the worker)",
					n, server, strings.Join(visible, ", "), near, mcp.Separator, strings.SplitN(n, mcp.Separator, 2)[1], server)
			}
			// Not running yet: each run checks that it is (a clear
			// error at its start otherwise).
			src, deferred = opts.Services, true
		case opts.MCPUnresolved:
			// Listing only: a tool service is only known at run time.
		default:
			return nil, unknownRemote(n, server, visible, false)
		}
		if _, err := path.Match(n, ""); err != nil {
			return nil, fmt.Errorf("tool pattern %q: %w", n, err)
		}
		if seen[n] {
			continue
		}
		seen[n] = true
		sel.remote = append(sel.remote, remoteSel{pattern: n, source: src, deferred: deferred})
		if src == nil || deferred {
			continue
		}
		ts, err := src.ServerTools(server)
		if err != nil {
			return nil, fmt.Errorf("tool %q: %w", n, err)
		}
		if len(match(n, ts)) == 0 {
			what := "unknown tool"
			if isGlob(n) {
				what = "no tool matches"
			}
			err := fmt.Errorf("%s %q (%s %q has: %s)", what, n, kind, server, strings.Join(names(ts), ", "))
			if near := nearest(n, names(ts)); near != "" && !isGlob(n) {
				err = fmt.Errorf("%w; did you mean %s?", err, near)
			}
			return nil, err
		}
	}
	return sel, nil
}

func unknownRemote(n, server string, visible []string, services bool) error {
	declared := "add it under mcp_servers"
	if len(visible) > 0 {
		declared = "declared: " + strings.Join(visible, ", ")
	}
	if services {
		return fmt.Errorf("unknown tool %q: %q is neither an MCP server of the agents file (%s) nor a running tool service (start the service before the worker)", n, server, declared)
	}
	err := fmt.Errorf("unknown tool %q: no MCP server %q is declared (%s)", n, server, declared)
	if near := nearest(server, visible); near != "" {
		err = fmt.Errorf("%w; did you mean %s%s%s?", err, near, mcp.Separator, strings.SplitN(n, mcp.Separator, 2)[1])
	}
	return err
}

func unknownTool(n string, visible []string, builtin tools.Set) error {
	msg := fmt.Sprintf("unknown tool %q (built-in tools: %s", n, strings.Join(builtin.Names(), ", "))
	if len(visible) > 0 {
		msg += "; MCP tools are named <server>__<tool>, from servers " + strings.Join(visible, ", ")
	}
	return errors.New(msg + ")")
}

// nearest returns the declared server name that name looks like a typo
// of: a few letters apart, or an abbreviation of it (its letters in
// order, the first the same); "" when none is.
func nearest(name string, declared []string) string {
	best, bestD := "", 0
	for _, d := range declared {
		if d == name || name == "" || d == "" {
			continue
		}
		dist := editDistance(strings.ToLower(name), strings.ToLower(d))
		limit := max(1, min(len(name), len(d))/3)
		if dist > limit && !(name[0] == d[0] && isSubsequence(name, d) && len(name) >= 3) {
			continue
		}
		if best == "" || dist < bestD {
			best, bestD = d, dist
		}
	}
	return best
}

func isSubsequence(short, long string) bool {
	i := 0
	for j := 0; i < len(short) && j < len(long); j++ {
		if short[i] == long[j] {
			i++
		}
	}
	return i == len(short)
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func isGlob(p string) bool { return strings.ContainsAny(p, "*?[") }

// match returns the tools whose names match the exact name or glob p.
func match(p string, ts []*loop.Tool) []*loop.Tool {
	var out []*loop.Tool
	for _, t := range ts {
		if ok, _ := path.Match(p, t.Name); ok {
			out = append(out, t)
		}
	}
	return out
}

func names(ts []*loop.Tool) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// remoteTools is the plugin that gives an agent its MCP and tool-service
// tools at the start of each run, from the lists the servers and services
// reported last: a tool a server added after a list_changed, or a
// service after a redeploy, is there for the next run.
type remoteTools struct {
	sel      []remoteSel
	approval []string
}

func (p *remoteTools) Name() string { return "remote-tools" }

// Setup fails the run when a tool service its agent names (and that was
// not running when the worker started) provides none of the tools, after
// discovering the services again when the source can.
func (p *remoteTools) Setup(ctx context.Context, _ *loop.RunContext) error {
	for _, sel := range p.sel {
		if !sel.deferred {
			continue
		}
		server, _, _ := strings.Cut(sel.pattern, mcp.Separator)
		ts, err := sel.source.ServerTools(server)
		if r, ok := sel.source.(interface{ Refresh(context.Context) error }); ok && (err != nil || len(match(sel.pattern, ts)) == 0) {
			// It may have started since the last discovery.
			if r.Refresh(ctx) == nil {
				ts, err = sel.source.ServerTools(server)
			}
		}
		if err != nil {
			return &loop.UserError{Message: fmt.Sprintf("tool %q: %v", sel.pattern, err), Hint: "start the tool service (or fix the tool name in the agents file), then submit the run again"}
		}
		if len(match(sel.pattern, ts)) == 0 {
			return &loop.UserError{Message: fmt.Sprintf("tool %q: tool service %q has none (it has: %s)", sel.pattern, server, strings.Join(names(ts), ", ")), Hint: "fix the tool name in the agents file"}
		}
	}
	return nil
}

// Tools returns the selected tools, approval-gated as the agent says.
func (p *remoteTools) Tools() []*loop.Tool {
	var out []*loop.Tool
	seen := map[string]bool{}
	for _, sel := range p.sel {
		server, _, _ := strings.Cut(sel.pattern, mcp.Separator)
		ts, err := sel.source.ServerTools(server)
		if err != nil {
			continue
		}
		for _, t := range match(sel.pattern, ts) {
			if seen[t.Name] {
				continue
			}
			seen[t.Name] = true
			if matchesAny(p.approval, t.Name) {
				g := *t
				g.NeedsApproval = true
				t = &g
			}
			out = append(out, t)
		}
	}
	return out
}

// matchesAny reports whether name matches one of the exact names or globs
// patterns (an approval list, a script's remote tools).
func matchesAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// deferredServer reports whether the agent selects tools of server, a
// tool service resolved when runs start.
func deferredServer(sel *selection, server string) bool {
	for _, r := range sel.remote {
		if s, _, _ := strings.Cut(r.pattern, mcp.Separator); r.deferred && s == server {
			return true
		}
	}
	return false
}
