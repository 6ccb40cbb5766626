package catalog

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/mcptest"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/tools/mcp"
)

// startMCP starts a manager for the file's servers, with the everything
// server standing in for each declared stdio server named "everything".
func startMCP(t *testing.T, f File) *mcp.Manager {
	t.Helper()
	servers, err := f.Servers()
	require.NoError(t, err)
	for name, s := range servers {
		if s.Command == "everything" {
			servers[name] = mcptest.Everything(t)
		}
	}
	m, err := mcp.New(mcp.Config{Servers: servers})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, m.Start(ctx))
	t.Cleanup(func() { require.NoError(t, m.Stop(context.Background())) })
	return m
}

func decode(t *testing.T, yaml string) File {
	t.Helper()
	f, err := Decode([]byte(yaml))
	require.NoError(t, err)
	return f
}

// toolNames returns the tools an agent's run sees: its own and its
// plugins'.
func toolNames(a *Agent) map[string]bool {
	out := map[string]bool{}
	for _, t := range a.Tools {
		out[t.Name] = t.NeedsApproval
	}
	for _, p := range a.Plugins {
		if pt, ok := p.(loop.PluginTools); ok {
			for _, t := range pt.Tools() {
				out[t.Name] = t.NeedsApproval
			}
		}
	}
	return out
}

const mcpFile = `
mcp_servers:
  everything: {command: everything}
agents:
  - name: all
    model: scripted
    tools: [echo, everything__*]
    approval: [everything__get-sum]
    script: [{text: x}]
  - name: one
    model: scripted
    tools: [everything__echo]
    script: [{text: x}]
  - name: own
    model: scripted
    mcp_servers:
      mine: {command: everything}
    tools: [mine__echo]
    script: [{text: x}]
`

func TestMCPTools(t *testing.T) {
	t.Parallel()
	f := decode(t, mcpFile)
	m := startMCP(t, f)
	o := opts(t)
	o.MCP = m
	c, err := Build(f, o)
	require.NoError(t, err)

	t.Run("a glob selects every tool of the server", func(t *testing.T) {
		a, _ := c.Get("all")
		got := toolNames(a)
		serverTools, err := m.ServerTools("everything")
		require.NoError(t, err)
		require.Greater(t, len(serverTools), 5)
		for _, st := range serverTools {
			_, ok := got[st.Name]
			require.True(t, ok, "missing %s", st.Name)
		}
		require.Contains(t, got, "echo")
		require.Len(t, got, len(serverTools)+1)
	})
	t.Run("approval gates an MCP tool like any tool", func(t *testing.T) {
		a, _ := c.Get("all")
		got := toolNames(a)
		require.True(t, got["everything__get-sum"])
		require.False(t, got["everything__echo"])
		require.False(t, got["echo"])
	})
	t.Run("ToolSchemas lists the resolved tools with the servers' schemas", func(t *testing.T) {
		schemas := c.ToolSchemas("one")
		require.Len(t, schemas, 1)
		require.Equal(t, "everything__echo", schemas[0].Name)
		require.Contains(t, string(schemas[0].Parameters), `"message"`)
		all := c.ToolSchemas("all")
		require.Equal(t, "echo", all[0].Name)
		require.Len(t, all, len(toolNames(func() *Agent { a, _ := c.Get("all"); return a }())))
		require.Nil(t, c.ToolSchemas("nobody"))
	})
	t.Run("an exact name selects one tool", func(t *testing.T) {
		a, _ := c.Get("one")
		require.Equal(t, map[string]bool{"everything__echo": false}, toolNames(a))
	})
	t.Run("a per-agent server serves that agent", func(t *testing.T) {
		a, _ := c.Get("own")
		require.Equal(t, map[string]bool{"mine__echo": false}, toolNames(a))
	})
	t.Run("a run calls the MCP tool", func(t *testing.T) {
		f := decode(t, `
mcp_servers:
  everything: {command: everything}
agents:
  - name: caller
    model: scripted
    tools: [everything__echo]
    script:
      - call: {name: everything__echo, args: {message: hi}}
      - text: done
`)
		c, err := Build(f, o)
		require.NoError(t, err)
		a, _ := c.Get("caller")
		res, err := loop.NewRunner(loop.RunnerConfig{}).Run(context.Background(), a.Agent, []loop.Entry{loop.UserText("x")})
		require.NoError(t, err)
		var outputs []string
		for _, e := range res.Entries {
			if e.Kind == loop.KindToolResult {
				outputs = append(outputs, e.Output)
			}
		}
		require.Equal(t, []string{"Echo: hi"}, outputs)
	})
	t.Run("start-up errors", func(t *testing.T) {
		for name, tc := range map[string]struct{ tools, want string }{
			"unknown MCP tool names the available ones": {"[everything__nope]", `unknown tool "everything__nope" (MCP server "everything" has: everything__echo,`},
			"a glob that matches nothing":               {"[everything__zz*]", `no tool matches "everything__zz*" (MCP server "everything" has:`},
			"an undeclared server":                      {"[github__issues]", `no MCP server "github" is declared (declared: everything)`},
			"another agent's server":                    {"[mine__echo]", `no MCP server "mine" is declared`},
			"a glob on built-ins":                       {"['ec*']", "patterns select MCP tools only"},
			"a typo of a tool of the server":            {"[everything__ecko]", `has: everything__echo,`},
			"a typo of a declared server":               {"[evrything__echo]", `no MCP server "evrything" is declared (declared: everything); did you mean everything__echo?`},
		} {
			t.Run(name, func(t *testing.T) {
				f := decode(t, "mcp_servers: {everything: {command: everything}}\nagents:\n  - {name: a, model: scripted, tools: "+tc.tools+", script: [{text: x}]}\n  - {name: b, model: scripted, mcp_servers: {mine: {command: everything}}, script: [{text: x}]}\n")
				_, err := Build(f, o)
				require.ErrorContains(t, err, tc.want)
			})
		}
		_, err := Build(decode(t, "mcp_servers: {everything: {command: everything}}\nagents:\n  - {name: a, model: scripted, tools: [everything__ecko], script: [{text: x}]}\n"), o)
		require.ErrorContains(t, err, "did you mean everything__echo?", "a tool a letter off one of the server's")

		// With tool services in the fleet, a name whose prefix is neither
		// a declared server nor a running service may be a service that
		// is not up yet, unless it looks like a declared server.
		withServices := o
		withServices.Services, _ = startService(t)
		for tools, want := range map[string]string{
			"[evrything__echo]": `"evrything" is not an MCP server of the agents file (declared: everything) nor a running tool service; did you mean everything__echo?`,
			"[every__echo]":     `did you mean everything__echo?`,
		} {
			_, err := Build(decode(t, "mcp_servers: {everything: {command: everything}}\nagents:\n  - {name: a, model: scripted, tools: "+tools+", script: [{text: x}]}\n"), withServices)
			require.ErrorContains(t, err, want, tools)
		}
		_, err = Build(decode(t, "mcp_servers: {everything: {command: everything}}\nagents:\n  - {name: a, model: scripted, tools: [mathsvc__add, laterservice__x], script: [{text: x}]}\n"), withServices)
		require.NoError(t, err, "a running tool service, and one not up yet that looks like no declared server")

		f := decode(t, "mcp_servers: {everything: {command: everything}}\nagents:\n  - {name: a, model: scripted, tools: [everything__echo], approval: [everything__get-sum], script: [{text: x}]}\n")
		_, err = Build(f, o)
		require.ErrorContains(t, err, `approval names "everything__get-sum", which is not among the agent's tools`)
	})
}

func TestMCPDeclarations(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ yaml, want string }{
		"unknown key":    {"mcp_servers: {gh: {comand: x}}\nagents: [{name: a, model: demo}]\n", `unknown key "comand" in an MCP server (known: command, args, env, cwd, url, headers)`},
		"no transport":   {"mcp_servers: {gh: {args: [x]}}\nagents: [{name: a, model: demo}]\n", "needs `command`"},
		"bad name":       {"mcp_servers: {'g__h': {command: x}}\nagents: [{name: a, model: demo}]\n", `without "__"`},
		"declared twice": {"mcp_servers: {gh: {command: x}}\nagents: [{name: a, model: demo, mcp_servers: {gh: {command: y}}}]\n", `MCP server "gh" is already declared by mcp_servers`},
		"no source":      {"mcp_servers: {gh: {command: x}}\nagents: [{name: a, model: demo}]\n", "pass it as Options.MCP"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), opts(t))
			require.ErrorContains(t, err, tc.want)
		})
	}
	t.Run("unresolved: names are checked against declared servers only", func(t *testing.T) {
		o := opts(t)
		o.MCPUnresolved = true
		c, err := Parse([]byte("mcp_servers: {gh: {url: 'https://example.invalid/mcp'}}\nagents: [{name: a, model: scripted, tools: [echo, 'gh__*'], script: [{text: x}]}]\n"), o)
		require.NoError(t, err)
		a, _ := c.Get("a")
		require.Equal(t, map[string]bool{"echo": false}, toolNames(a))
		require.Equal(t, []string{"echo", "gh__*"}, c.Infos()[0].Tools)
	})
	t.Run("a file without MCP servers needs no source", func(t *testing.T) {
		_, err := Parse([]byte(file), opts(t))
		require.NoError(t, err)
		require.False(t, strings.Contains(file, "mcp_servers"))
	})
}
