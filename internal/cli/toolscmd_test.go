package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/mcptest"
	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/toolsvc"
)

// lovia tools lists the built-in tools, the agents file's MCP tools and
// the running tool services with their instance counts and schemas.
func TestToolsCommand(t *testing.T) {
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	nc, err := nats.Connect(srv.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	type in struct {
		Text string `json:"text"`
	}
	for range 2 {
		svc, err := toolsvc.New(toolsvc.Config{Conn: nc, Name: "texttools", Version: "1.2.3", Tools: []*loop.Tool{
			loop.NewTool("shout", "Upper-case a text.", func(_ context.Context, _ *loop.RunContext, a in) (string, error) { return strings.ToUpper(a.Text), nil }),
		}})
		require.NoError(t, err)
		require.NoError(t, svc.Start(context.Background()))
		t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	}
	agents := filepath.Join(t.TempDir(), "agents.yaml")
	require.NoError(t, os.WriteFile(agents, []byte(fmt.Sprintf("mcp_servers:\n  everything: {command: node, args: [%q, stdio]}\nagents: [{name: a, model: demo}]\n",
		mcptest.Script(t, "server-everything"))), 0o644))

	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"tools", "--json", "--nats", srv.ClientURL(), "--agents", agents}, nil, &out, &errb, getenv(nil))
	require.Equal(t, ExitOK, code, errb.String())
	var l toolListing
	require.NoError(t, json.Unmarshal(out.Bytes(), &l), out.String())
	require.Empty(t, l.Errors)
	names := func(ts []toolEntry) []string {
		var n []string
		for _, t := range ts {
			n = append(n, t.Name)
		}
		return n
	}
	require.Contains(t, names(l.Builtin), "calculator")
	require.Contains(t, names(l.Builtin), "http_request")
	require.Contains(t, names(l.Builtin), "read_page")
	require.Len(t, l.MCP, 1)
	require.Equal(t, "everything", l.MCP[0].Server)
	require.Contains(t, names(l.MCP[0].Tools), "everything__echo")
	require.Len(t, l.Services, 1)
	require.Equal(t, serviceEntry{Name: "texttools", Version: "1.2.3", Instances: 2, Tools: l.Services[0].Tools}, l.Services[0])
	require.Equal(t, []string{"texttools__shout"}, names(l.Services[0].Tools))
	require.JSONEq(t, `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`, string(l.Services[0].Tools[0].Parameters))

	out.Reset()
	code = Main(context.Background(), []string{"tools", "--nats", srv.ClientURL()}, nil, &out, &errb, getenv(nil))
	require.Equal(t, ExitOK, code, errb.String())
	require.Contains(t, out.String(), "tool service texttools 1.2.3 (2 instances)")
	require.Contains(t, out.String(), "texttools__shout")

	// Without NATS, the rest is listed and the services' absence said.
	out.Reset()
	errb.Reset()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code = Main(ctx, []string{"tools", "--nats", "nats://127.0.0.1:1"}, nil, &out, &errb, getenv(nil))
	require.Equal(t, ExitOK, code)
	require.Contains(t, out.String(), "calculator")
	require.Contains(t, errb.String(), "tool services not listed: cannot connect to NATS")
}
