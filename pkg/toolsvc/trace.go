package toolsvc

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/telemetry"
)

// startServe opens the "toolsvc_serve" span of a call, a child of the
// trace context its request carries (the caller's toolsvc_call). With
// tracing off it returns ctx and a noop span.
func (s *Service) startServe(ctx context.Context, t *loop.Tool, req micro.Request, callID string) (context.Context, trace.Span) {
	if telemetry.IsNoop(s.cfg.Tracing) {
		return ctx, noop.Span{}
	}
	ctx = bus.ExtractTrace(ctx, nats.Header(req.Headers()))
	attrs := []attribute.KeyValue{attribute.String("lovia.tool_service", s.cfg.Name), attribute.String("lovia.tool", t.Name)}
	if callID != "" {
		attrs = append(attrs, attribute.String("lovia.call_id", callID))
	}
	return telemetry.Tracer(s.cfg.Tracing).Start(ctx, "toolsvc_serve", trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
}

// endServe ends a call's span with its reply: an error reply is an error.
func endServe(span trace.Span, rec record) {
	var err error
	if rec.Code != "" {
		err = errors.New(rec.Description)
	}
	telemetry.EndSpan(span, err)
}
