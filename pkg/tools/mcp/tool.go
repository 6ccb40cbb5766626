package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/jsonschema"
	"github.com/lovia-fleet/lovia/pkg/telemetry"
)

// Separator joins a server's name and its tool's name: "<server>__<tool>".
const Separator = "__"

// ToolName returns the agent-facing name of a server's tool.
func ToolName(server, tool string) string { return server + Separator + tool }

// codeRejectedByTransport is the SDK's JSON-RPC code for a request the
// transport could not deliver (e.g. the HTTP server is unreachable): a
// transport failure, not the server's answer.
const codeRejectedByTransport = -32005

var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// tool turns one of the server's tools into a loop tool whose calls go
// through this connection, whichever session is current.
func (c *conn) tool(t *sdk.Tool) (*loop.Tool, error) {
	if !toolNameRE.MatchString(t.Name) {
		return nil, fmt.Errorf("tool name %q is not 1-128 characters of [A-Za-z0-9_-], which model APIs require", t.Name)
	}
	name := ToolName(c.name, t.Name)
	params, err := json.Marshal(t.InputSchema)
	if err != nil || string(params) == "null" {
		params = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	// The same validator, and so the same messages, as Go tools: keywords
	// it does not check are left to the server (jsonschema.Parse).
	resolved, err := jsonschema.Parse(params)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	remote := t.Name
	return &loop.Tool{
		Name:        name,
		Description: desc,
		Parameters:  params,
		Func: func(ctx context.Context, _ *loop.RunContext, args json.RawMessage) (any, error) {
			// Inside the loop's tool_call span: a client span for the call
			// to the server (noop when the run is not traced).
			ctx, span := telemetry.StartChild(ctx, "mcp_call", trace.SpanKindClient,
				attribute.String("lovia.mcp.server", c.name), attribute.String("lovia.mcp.tool", remote))
			v, err := c.call(ctx, name, remote, resolved, args)
			telemetry.EndSpan(span, err)
			return v, err
		},
	}, nil
}

// call validates the arguments against the server's schema, calls the tool
// on the current session and renders the result.
func (c *conn) call(ctx context.Context, name, remote string, schema *jsonschema.Schema, args json.RawMessage) (any, error) {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	var raw any
	if err := json.Unmarshal(args, &raw); err != nil {
		return nil, &loop.InvalidToolArguments{Tool: name, Message: fmt.Sprintf("Invalid arguments for tool '%s': %v", name, err)}
	}
	if err := schema.Validate(raw); err != nil {
		return nil, &loop.InvalidToolArguments{Tool: name, Message: fmt.Sprintf("Invalid arguments for tool '%s': %v", name, err)}
	}
	in, ok := raw.(map[string]any)
	if !ok {
		// A schema that does not say "type": "object": MCP arguments are one.
		return nil, &loop.InvalidToolArguments{Tool: name, Message: fmt.Sprintf("Invalid arguments for tool '%s': expected object, got %s", name, jsonKind(raw))}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.CallTimeout)
		defer cancel()
	}
	sess, err := c.current(ctx)
	if err != nil {
		return nil, &loop.ToolError{
			Tool:    name,
			Message: fmt.Sprintf("MCP server %q is not available: %v; it is being restarted: call the tool again shortly", c.name, err),
			Hint:    "the worker restarts it with backoff: call the tool again shortly; if this persists, check the server's command or url in the agents file",
			Cause:   err,
		}
	}
	params := &sdk.CallToolParams{Name: remote, Arguments: in}
	// Servers that report progress do so against this token; the
	// connection logs it at debug level.
	params.SetProgressToken(fmt.Sprintf("%s-%d", c.name, c.calls.Add(1)))
	res, err := sess.CallTool(ctx, params)
	if err != nil {
		return nil, c.callError(ctx, name, err)
	}
	if res.IsError {
		msg := loop.PartsText(parts(res.Content))
		if msg == "" {
			msg = fmt.Sprintf("MCP tool %s reported an error without a message", name)
		}
		return nil, &loop.ToolError{Tool: name, Message: msg}
	}
	return render(res), nil
}

func (c *conn) callError(ctx context.Context, name string, err error) error {
	if ctx.Err() != nil {
		return &loop.ToolError{
			Tool:    name,
			Message: fmt.Sprintf("MCP server %q did not answer %s in time: %v", c.name, name, context.Cause(ctx)),
			Hint:    "the tool may be slow: raise its timeout, or call it with less work",
			Cause:   err,
		}
	}
	var werr *jsonrpc.Error
	if errors.As(err, &werr) && werr.Code != codeRejectedByTransport {
		return &loop.ToolError{
			Tool:    name,
			Message: fmt.Sprintf("MCP server %q refused the call: %s", c.name, werr.Message),
			Hint:    "check the arguments against the tool's schema",
			Cause:   err,
		}
	}
	// The transport failed: the server may have died. The supervisor
	// checks the session and restarts it if it is gone.
	poke(c.suspect)
	return &loop.ToolError{
		Tool:    name,
		Message: fmt.Sprintf("MCP server %q failed during the call: %v; it is being restarted: call the tool again", c.name, err),
		Hint:    "the worker reconnects or restarts the server: call the tool again",
		Cause:   fmt.Errorf("%w: %w", ErrServerDown, err),
	}
}

// render returns the result as the model sees it: plain text when every
// content item is text (or the structured content when there is none),
// content parts when there are images, audio or resources.
func render(res *sdk.CallToolResult) any {
	ps := parts(res.Content)
	if len(ps) == 0 {
		if res.StructuredContent != nil {
			return res.StructuredContent
		}
		return ""
	}
	allText := true
	for _, p := range ps {
		allText = allText && p.Type == loop.PartText
	}
	if allText {
		return loop.PartsText(ps)
	}
	return ps
}

// parts converts MCP content to lovia's content parts: text as text,
// images as images, audio and binary resources as files, text resources
// as text, resource links as a text line naming the resource.
func parts(content []sdk.Content) []loop.Part {
	out := make([]loop.Part, 0, len(content))
	for _, c := range content {
		switch v := c.(type) {
		case *sdk.TextContent:
			out = append(out, loop.Part{Type: loop.PartText, Text: v.Text})
		case *sdk.ImageContent:
			out = append(out, loop.Part{Type: loop.PartImage, Data: base64.StdEncoding.EncodeToString(v.Data), MimeType: v.MIMEType})
		case *sdk.AudioContent:
			out = append(out, loop.Part{Type: loop.PartFile, Data: base64.StdEncoding.EncodeToString(v.Data), MimeType: v.MIMEType, Filename: "audio"})
		case *sdk.EmbeddedResource:
			r := v.Resource
			if r == nil {
				continue
			}
			if r.Blob != nil {
				out = append(out, loop.Part{Type: loop.PartFile, Data: base64.StdEncoding.EncodeToString(r.Blob), MimeType: r.MIMEType, Filename: r.URI})
			} else {
				out = append(out, loop.Part{Type: loop.PartText, Text: r.Text})
			}
		case *sdk.ResourceLink:
			label := v.Name
			if v.Title != "" {
				label = v.Title
			}
			line := fmt.Sprintf("[resource %s: %s", label, v.URI)
			if v.MIMEType != "" {
				line += ", " + v.MIMEType
			}
			if d := strings.TrimSpace(v.Description); d != "" {
				line += " — " + d
			}
			out = append(out, loop.Part{Type: loop.PartText, Text: line + "]"})
		}
	}
	return out
}

// jsonKind names the JSON type of a decoded value, as validation messages do.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	}
	return "object"
}
