package service

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/telemetry"
)

// apiTracing is the API's tracer.
type apiTracing struct {
	tp     trace.TracerProvider
	tracer trace.Tracer
	on     bool
}

func newAPITracing(tp trace.TracerProvider) apiTracing {
	return apiTracing{tp: tp, tracer: telemetry.Tracer(tp), on: !telemetry.IsNoop(tp)}
}

// TracerProvider is Config.Tracing (a noop provider when unset): the
// gateway opens its HTTP spans with it.
func (a *API) TracerProvider() trace.TracerProvider {
	if a.trace.tp == nil {
		return noop.NewTracerProvider()
	}
	return a.trace.tp
}

// Submit validates and enqueues a run (docs/protocol.md#subjects,
// <p>.api.submit). It opens the "submit" span, a child of the span in ctx
// (the gateway's HTTP span, a traceparent the service request carried);
// the run request carries its trace context to the worker that claims it.
func (a *API) Submit(ctx context.Context, req *bus.RunRequest, enc bus.Encoding) (*bus.SubmitReply, error) {
	if !a.trace.on {
		return a.submit(ctx, req, enc)
	}
	ctx, span := a.trace.tracer.Start(ctx, "submit", trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("lovia.agent", req.Agent)))
	rep, err := a.submit(ctx, req, enc)
	if rep != nil {
		span.SetAttributes(attribute.String("lovia.run_id", rep.RunID), attribute.String("lovia.status", string(rep.Status)))
	}
	telemetry.EndSpan(span, err)
	return rep, err
}
