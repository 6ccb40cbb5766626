package mcp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lovia-fleet/lovia/pkg/tools/mcp"
)

// A manager connects to a streamable HTTP MCP server and offers its tools
// as loop tools named <server>__<tool>.
func Example() {
	// An MCP server written with the Go SDK, served on a loopback port.
	server := sdk.NewServer(&sdk.Implementation{Name: "shouter", Version: "1"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	sdk.AddTool(server, &sdk.Tool{Name: "shout", Description: "Shout the text."}, func(_ context.Context, _ *sdk.CallToolRequest, a in) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: a.Text + "!"}}}, nil, nil
	})
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil))
	defer hs.Close()
	defer func() {
		for ss := range server.Sessions() {
			_ = ss.Close()
		}
	}()

	m, err := mcp.New(mcp.Config{Servers: map[string]mcp.Server{"shouter": {URL: hs.URL}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer m.Stop(ctx)

	tools, _ := m.ServerTools("shouter")
	for _, t := range tools {
		fmt.Println(t.Name, "-", t.Description)
	}
	out, err := tools[0].Func(ctx, nil, []byte(`{"text":"hello"}`))
	fmt.Println(out, err)
	// Output:
	// shouter__shout - Shout the text.
	// hello! <nil>
}
