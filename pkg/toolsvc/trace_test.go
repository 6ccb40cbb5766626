package toolsvc_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/lovia-fleet/lovia/pkg/toolsvc"
)

// TestCallCarriesTraceContext: a call made inside a span (the loop's
// tool_call) opens a toolsvc_call client span and sends its trace context
// in the request's traceparent header; the service, in its own tracer
// provider as in its own process, serves the call in a toolsvc_serve
// span that continues that trace under the client span. An error reply
// marks the serve span as failed.
func TestCallCarriesTraceContext(t *testing.T) {
	t.Parallel()
	nc := setup(t)
	serverRec, callerRec := tracetest.NewSpanRecorder(), tracetest.NewSpanRecorder()
	serverTP := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(serverRec))
	callerTP := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(callerRec))
	t.Cleanup(func() { _ = serverTP.Shutdown(context.Background()); _ = callerTP.Shutdown(context.Background()) })
	var runs atomic.Int64
	serve(t, toolsvc.Config{Conn: nc, Name: "calc", Tools: counterTools(&runs, nil), Tracing: serverTP})
	si := discover(t, nc, "calc", 1)
	add, fail := callerTool(t, nc, si, "calc__add", nil), callerTool(t, nc, si, "calc__fail", nil)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx, toolCall := callerTP.Tracer("loop").Start(ctx, "tool_call")
	v, err := add.Func(ctx, nil, json.RawMessage(`{"a":2,"b":3}`))
	require.NoError(t, err)
	require.EqualValues(t, 5, v)
	_, err = fail.Func(ctx, nil, json.RawMessage(`{}`))
	require.Error(t, err)
	toolCall.End()

	var calls []sdktrace.ReadOnlySpan
	for _, s := range callerRec.Ended() {
		if s.Name() == "toolsvc_call" {
			calls = append(calls, s)
			require.Equal(t, toolCall.SpanContext().SpanID(), s.Parent().SpanID(), "the client span under the caller's")
			require.Equal(t, trace.SpanKindClient, s.SpanKind())
		}
	}
	require.Len(t, calls, 2)
	var served []sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool { served = serverRec.Ended(); return len(served) == 2 }, 10*time.Second, 10*time.Millisecond,
		"waiting for the service's two spans")
	for i, s := range served {
		require.Equal(t, "toolsvc_serve", s.Name())
		require.Equal(t, trace.SpanKindServer, s.SpanKind())
		require.Equal(t, toolCall.SpanContext().TraceID(), s.SpanContext().TraceID(), "the service continues the caller's trace")
		require.True(t, s.Parent().IsRemote())
		require.Equal(t, calls[i].SpanContext().SpanID(), s.Parent().SpanID(), "under the caller's toolsvc_call")
	}
	require.Equal(t, "Unset", served[0].Status().Code.String())
	require.Equal(t, "Error", served[1].Status().Code.String(), "the failing tool's reply is an error")
}

// TestCallOutsideSpanSendsNoTraceContext: outside any span, a call sends
// no traceparent and the service opens a root span only if it traces.
func TestCallOutsideSpanSendsNoTraceContext(t *testing.T) {
	t.Parallel()
	nc := setup(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	var runs atomic.Int64
	serve(t, toolsvc.Config{Conn: nc, Name: "calc2", Tools: counterTools(&runs, nil), Tracing: tp})
	si := discover(t, nc, "calc2", 1)
	v, err := invoke(callerTool(t, nc, si, "calc2__add", nil), `{"a":1,"b":1}`)
	require.NoError(t, err)
	require.EqualValues(t, 2, v)
	require.Eventually(t, func() bool { return len(rec.Ended()) == 1 }, 10*time.Second, 10*time.Millisecond)
	require.False(t, rec.Ended()[0].Parent().IsValid(), "a root span: the request carried no trace context")
}
