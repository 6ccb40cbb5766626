package bus

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// W3C trace context headers (docs/protocol.md#trace-context). A run
// request carries the trace context of its submit; a worker's claim, the
// run's events and its calls to tool services continue that trace, so one
// trace shows a run across processes, also across a crash and a resume on
// another worker. Both are optional: a message without them starts no
// trace of its own.
const (
	// HeaderTraceParent is the W3C traceparent, "00-<trace id>-<span id>-<flags>".
	HeaderTraceParent = "traceparent"
	// HeaderTraceState is the W3C tracestate that goes with it.
	HeaderTraceState = "tracestate"
)

// TraceContext is the W3C trace context a message carries: its
// traceparent and tracestate header values. The zero value is no trace
// context, which costs nothing to carry.
type TraceContext struct {
	Parent string `json:"traceparent,omitempty" msgpack:"traceparent,omitempty"`
	State  string `json:"tracestate,omitempty" msgpack:"tracestate,omitempty"`
}

// IsZero reports whether t carries no trace context.
func (t TraceContext) IsZero() bool { return t.Parent == "" }

// traceContextPropagator is stateless: every process reads and writes the
// W3C format whatever its global propagator is.
var traceContextPropagator propagation.TraceContext

// TraceContextOf returns the trace context of the span in ctx (zero when
// ctx has no valid, sampled-or-not span context, as when tracing is off).
func TraceContextOf(ctx context.Context) TraceContext {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return TraceContext{}
	}
	c := traceCarrier{}
	traceContextPropagator.Inject(ctx, &c)
	return TraceContext(c)
}

// TraceContextFrom returns the trace context a message's headers carry.
func TraceContextFrom(h nats.Header) TraceContext {
	if h == nil {
		return TraceContext{}
	}
	return TraceContext{Parent: firstOf(h[HeaderTraceParent]), State: firstOf(h[HeaderTraceState])}
}

// Set writes t to h (nothing when t is zero). h must not be nil unless t is
// zero.
func (t TraceContext) Set(h nats.Header) {
	if t.Parent == "" {
		return
	}
	h[HeaderTraceParent] = []string{t.Parent}
	if t.State != "" {
		h[HeaderTraceState] = []string{t.State}
	}
}

// Context returns ctx with t as its remote parent span context: spans
// started from it continue t's trace. A zero or malformed t returns ctx.
func (t TraceContext) Context(ctx context.Context) context.Context {
	if t.Parent == "" {
		return ctx
	}
	c := traceCarrier(t)
	return traceContextPropagator.Extract(ctx, &c)
}

// InjectTrace writes the trace context of the span in ctx to h, for a
// message that continues the trace in another process.
func InjectTrace(ctx context.Context, h nats.Header) { TraceContextOf(ctx).Set(h) }

// ExtractTrace returns ctx with the trace context of h as its remote
// parent (ctx itself when h carries none).
func ExtractTrace(ctx context.Context, h nats.Header) context.Context {
	return TraceContextFrom(h).Context(ctx)
}

func firstOf(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// traceCarrier is a propagation.TextMapCarrier over the two W3C headers.
type traceCarrier TraceContext

func (c *traceCarrier) Get(key string) string {
	switch key {
	case HeaderTraceParent:
		return c.Parent
	case HeaderTraceState:
		return c.State
	}
	return ""
}

func (c *traceCarrier) Set(key, value string) {
	switch key {
	case HeaderTraceParent:
		c.Parent = value
	case HeaderTraceState:
		c.State = value
	}
}

func (c *traceCarrier) Keys() []string { return []string{HeaderTraceParent, HeaderTraceState} }
