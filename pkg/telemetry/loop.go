package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// InstrumentationName names the fleet's tracers (the instrumentation
// scope of its spans).
const InstrumentationName = "github.com/lovia-fleet/lovia"

// Tracer returns the fleet's tracer of tp (nil: noop).
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(InstrumentationName)
}

// IsNoop reports whether tp records nothing (nil, or OpenTelemetry's noop
// provider), so callers can skip building span attributes.
func IsNoop(tp trace.TracerProvider) bool {
	switch tp.(type) {
	case nil, noop.TracerProvider:
		return true
	}
	return false
}

// LoopTracer adapts tp to the loop's Tracer: the loop's spans ("run",
// "turn", "model_call", "tool_call", "handoff") become OpenTelemetry spans
// children of the span in the context the run was started with, their
// attributes prefixed "lovia." (lovia.agent, lovia.run_id, lovia.tool,
// …), and a span that ends with an error records it and has status Error.
// For a noop tp it returns loop.NoopTracer, which the loop skips at no cost.
func LoopTracer(tp trace.TracerProvider) loop.Tracer {
	if IsNoop(tp) {
		return loop.NoopTracer{}
	}
	return loopTracer{t: Tracer(tp)}
}

type loopTracer struct{ t trace.Tracer }

func (l loopTracer) Start(ctx context.Context, name string, attrs ...loop.Attr) (context.Context, loop.Span) {
	kv := make([]attribute.KeyValue, 0, len(attrs))
	for _, a := range attrs {
		kv = append(kv, Attribute("lovia."+a.Key, a.Value))
	}
	ctx, s := l.t.Start(ctx, name, trace.WithAttributes(kv...))
	return ctx, loopSpan{s}
}

type loopSpan struct{ s trace.Span }

func (l loopSpan) End(err error) {
	EndSpan(l.s, err)
}

// EndSpan ends s, recording err (status Error with its message) when it is
// not nil.
func EndSpan(s trace.Span, err error) {
	if err != nil {
		s.RecordError(err)
		s.SetStatus(codes.Error, err.Error())
	}
	s.End()
}

// Attribute converts a value of the loop's span attributes.
func Attribute(key string, v any) attribute.KeyValue {
	switch v := v.(type) {
	case string:
		return attribute.String(key, v)
	case int:
		return attribute.Int(key, v)
	case int64:
		return attribute.Int64(key, v)
	case float64:
		return attribute.Float64(key, v)
	case bool:
		return attribute.Bool(key, v)
	case fmt.Stringer:
		return attribute.String(key, v.String())
	}
	return attribute.String(key, fmt.Sprint(v))
}

// StartChild opens a span child of the span in ctx, with that span's
// provider: a component called inside a traced span (a tool inside its
// tool_call) continues the trace without a provider of its own. Outside a
// recording span it returns ctx and a noop span, allocating nothing.
func StartChild(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent
	}
	return parent.TracerProvider().Tracer(InstrumentationName).Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}
