package mcp_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/mcptest"
	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/jsonschema"
	"github.com/lovia-fleet/lovia/pkg/tools/mcp"
	"github.com/lovia-fleet/lovia/pkg/toolsvc"
)

// sumIn is server-everything's get-sum input as a Go type: two required
// numbers.
type sumIn struct {
	A float64 `json:"a" desc:"First number"`
	B float64 `json:"b" desc:"Second number"`
}

// TestSameArgumentsSameMessage gives the same invalid arguments to one
// tool living in three places — a Go tool, the real MCP server's tool, a
// tool service's endpoint — and expects the same message for the model
// from each: their schemas are checked by the same code.
func TestSameArgumentsSameMessage(t *testing.T) {
	t.Parallel()
	sum := func(_ context.Context, _ *loop.RunContext, in sumIn) (float64, error) { return in.A + in.B, nil }

	goTool := loop.NewTool(mcp.ToolName("everything", "get-sum"), "Adds two numbers.", sum)

	m := start(t, mcp.Config{Servers: map[string]mcp.Server{"everything": mcptest.Everything(t)}})
	mcpTool := tool(t, m, "everything", "everything__get-sum")

	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir(), Port: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	nc, err := srv.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	svc, err := toolsvc.New(toolsvc.Config{Conn: nc, Name: "everything", Tools: []*loop.Tool{loop.NewTool("get-sum", "Adds two numbers.", sum)}})
	require.NoError(t, err)
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, svc.Stop(ctx))
	})
	var info toolsvc.ToolInfo
	require.Eventually(t, func() bool {
		infos, err := toolsvc.Discover(context.Background(), nc, toolsvc.DefaultPrefix, 0)
		require.NoError(t, err)
		for _, si := range infos {
			for _, ti := range si.Tools {
				if ti.Name == "everything__get-sum" {
					info = ti
					return true
				}
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "waiting for the tool service everything to be discovered")
	svcTool, err := toolsvc.Tool(toolsvc.CallerConfig{Conn: nc}, info)
	require.NoError(t, err)

	invoke := func(tl *loop.Tool, args string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := tl.Func(ctx, nil, json.RawMessage(args))
		require.ErrorIs(t, err, loop.ErrInvalidToolArgs, "%s with %s", tl.Name, args)
		return err.Error()
	}
	for _, args := range []string{
		`{"a":"1"}`,
		`{"a":1,"b":true}`,
		`{}`,
		`[1,2]`,
		`null`,
		`"3"`,
		`{"a":`,
	} {
		want := invoke(goTool, args)
		require.Equal(t, want, invoke(mcpTool, args), "MCP tool, arguments %s", args)
		require.Equal(t, want, invoke(svcTool, args), "tool-service tool, arguments %s", args)
	}
	require.Equal(t, "Invalid arguments for tool 'everything__get-sum': a: expected number, got string; b: is required",
		invoke(mcpTool, `{"a":"1"}`))

	ok, err := mcpTool.Func(context.Background(), nil, json.RawMessage(`{"a":1,"b":2}`))
	require.NoError(t, err, "valid arguments reach the server")
	require.Contains(t, ok, "3")
}

// TestRealServerSchemasParse parses every tool schema the real test
// servers publish with the validator all tools share, and checks each
// tool's required properties are enforced.
func TestRealServerSchemasParse(t *testing.T) {
	t.Parallel()
	m := start(t, mcp.Config{Servers: map[string]mcp.Server{
		"everything": mcptest.Everything(t),
		"fs":         mcptest.Filesystem(t, t.TempDir()),
	}})
	n := 0
	for _, server := range []string{"everything", "fs"} {
		ts, err := m.ServerTools(server)
		require.NoError(t, err)
		for _, tl := range ts {
			s, err := jsonschema.Parse(tl.Parameters)
			require.NoError(t, err, "%s: %s", tl.Name, tl.Parameters)
			require.Empty(t, s.Unchecked, "%s uses keywords we do not check", tl.Name)
			for _, r := range s.Required {
				err := s.Validate(map[string]any{})
				require.ErrorContains(t, err, r+": is required", tl.Name)
			}
			n++
		}
	}
	require.Greater(t, n, 10, "the servers list their tools")
}
