package mcp_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/tools/mcp"
)

type greetIn struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

type greetOut struct {
	Greeting string `json:"greeting"`
}

// httpServer serves an MCP server written with the Go SDK over
// streamable HTTP on a loopback port; requests without the bearer token
// are refused.
type httpServer struct {
	srv    *sdk.Server
	http   *http.Server
	addr   string
	denied atomic.Int64
}

func newHTTPServer(t *testing.T, addr, token string) *httpServer {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "greeter", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "greet", Description: "Greet someone."}, func(_ context.Context, _ *sdk.CallToolRequest, in greetIn) (*sdk.CallToolResult, greetOut, error) {
		if in.Name == "nobody" {
			return nil, greetOut{}, errors.New("cannot greet nobody")
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "Hello, " + in.Name + "!"}}}, greetOut{}, nil
	})
	hs := &httpServer{srv: s}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	hs.addr = ln.Addr().String()
	hs.http = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			hs.denied.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})}
	served := make(chan struct{})
	go func() { defer close(served); _ = hs.http.Serve(ln) }()
	t.Cleanup(func() { hs.close(); <-served })
	return hs
}

func (hs *httpServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if hs.http.Shutdown(ctx) != nil {
		_ = hs.http.Close()
	}
	for ss := range hs.srv.Sessions() {
		_ = ss.Close()
	}
}

func TestStreamableHTTP(t *testing.T) {
	t.Parallel()
	hs := newHTTPServer(t, "127.0.0.1:0", "s3cret")
	m := start(t, mcp.Config{
		Servers: map[string]mcp.Server{"greeter": {
			URL:     "http://${GREETER_ADDR}/mcp",
			Headers: map[string]string{"Authorization": "Bearer ${GREETER_TOKEN}"},
		}},
		Getenv: func(k string) string {
			return map[string]string{"GREETER_ADDR": hs.addr, "GREETER_TOKEN": "s3cret"}[k]
		},
	})
	require.Zero(t, hs.denied.Load(), "the ${ENV} header must be expanded")

	greet := tool(t, m, "greeter", "greeter__greet")
	require.Contains(t, string(greet.Parameters), `"name"`)
	out, err := call(t, greet, map[string]any{"name": "Ada"})
	require.NoError(t, err)
	require.Equal(t, "Hello, Ada!", out)

	t.Run("isError is an error result with the server's message", func(t *testing.T) {
		_, err := call(t, greet, map[string]any{"name": "nobody"})
		var te *loop.ToolError
		require.ErrorAs(t, err, &te)
		require.Contains(t, te.Message, "cannot greet nobody")
	})

	t.Run("list_changed refreshes the tools", func(t *testing.T) {
		sdk.AddTool(hs.srv, &sdk.Tool{Name: "wave", Description: "Wave."}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "👋"}}}, nil, nil
		})
		require.Eventually(t, func() bool {
			ts, err := m.ServerTools("greeter")
			return err == nil && len(ts) == 2 && ts[1].Name == "greeter__wave"
		}, 30*time.Second, 10*time.Millisecond, "waiting for the manager to list the added tool")
		out, err := call(t, tool(t, m, "greeter", "greeter__wave"), map[string]any{})
		require.NoError(t, err)
		require.Equal(t, "👋", out)
	})
}

// An HTTP server that goes away: calls are clear tool errors naming the
// server; once it is back, the manager reconnects and calls work again.
func TestStreamableHTTPReconnects(t *testing.T) {
	t.Parallel()
	hs := newHTTPServer(t, "127.0.0.1:0", "t")
	m := start(t, mcp.Config{
		Servers:     map[string]mcp.Server{"greeter": {URL: "http://" + hs.addr + "/mcp", Headers: map[string]string{"Authorization": "Bearer t"}}},
		MinBackoff:  20 * time.Millisecond,
		MaxBackoff:  100 * time.Millisecond,
		ConnectWait: 200 * time.Millisecond,
	})
	greet := tool(t, m, "greeter", "greeter__greet")
	hs.close()

	_, err := call(t, greet, map[string]any{"name": "Ada"})
	var te *loop.ToolError
	require.ErrorAs(t, err, &te)
	require.ErrorIs(t, err, mcp.ErrServerDown)
	require.Contains(t, te.Message, `MCP server "greeter"`)

	// A new server on the same address knows nothing of the old session.
	newHTTPServer(t, hs.addr, "t")
	require.Eventually(t, func() bool {
		out, err := call(t, greet, map[string]any{"name": "Ada"})
		return err == nil && out == "Hello, Ada!"
	}, 30*time.Second, 20*time.Millisecond, "waiting for a call to work after the server came back")
	s, err := m.Status("greeter")
	require.NoError(t, err)
	require.GreaterOrEqual(t, s.Connects, 2)
}
