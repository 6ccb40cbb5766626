package mcp_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/lovia-fleet/lovia/pkg/tools/mcp"
)

// TestCallSpan: a call made inside a span (the loop's tool_call) is an
// mcp_call client span under it, naming the server and the tool; a call
// the server fails marks it failed. Outside a span nothing is recorded.
func TestCallSpan(t *testing.T) {
	t.Parallel()
	hs := newHTTPServer(t, "127.0.0.1:0", "tok")
	m := start(t, mcp.Config{
		Servers: map[string]mcp.Server{"greeter": {URL: "http://" + hs.addr + "/mcp", Headers: map[string]string{"Authorization": "Bearer tok"}}},
	})
	greet := tool(t, m, "greeter", "greeter__greet")
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := greet.Func(ctx, nil, json.RawMessage(`{"name":"Ada"}`)) // no span
	require.NoError(t, err)
	require.Empty(t, rec.Ended())

	ctx, toolCall := tp.Tracer("loop").Start(ctx, "tool_call")
	out, err := greet.Func(ctx, nil, json.RawMessage(`{"name":"Ada"}`))
	require.NoError(t, err)
	require.Equal(t, "Hello, Ada!", out)
	_, err = greet.Func(ctx, nil, json.RawMessage(`{"name":"nobody"}`))
	require.Error(t, err)
	toolCall.End()

	var calls []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "mcp_call" {
			calls = append(calls, s)
		}
	}
	require.Len(t, calls, 2)
	for _, s := range calls {
		require.Equal(t, toolCall.SpanContext().SpanID(), s.Parent().SpanID())
		require.Equal(t, trace.SpanKindClient, s.SpanKind())
		attrs := map[string]string{}
		for _, kv := range s.Attributes() {
			attrs[string(kv.Key)] = kv.Value.Emit()
		}
		require.Equal(t, "greeter", attrs["lovia.mcp.server"])
		require.Equal(t, "greet", attrs["lovia.mcp.tool"])
	}
	require.Equal(t, "Unset", calls[0].Status().Code.String())
	require.Equal(t, "Error", calls[1].Status().Code.String())
}
