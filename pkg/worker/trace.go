package worker

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/lifecycle"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/telemetry"
)

// workerTracing is the worker's tracer: the claim spans, and the loop's.
type workerTracing struct {
	tracer trace.Tracer
	loop   loop.Tracer
	on     bool
}

func newWorkerTracing(tp trace.TracerProvider) workerTracing {
	return workerTracing{tracer: telemetry.Tracer(tp), loop: telemetry.LoopTracer(tp), on: !telemetry.IsNoop(tp)}
}

// noopSpan is what startClaim returns with tracing off.
var noopSpan = noop.Span{}

// startClaim opens the "claim" span of a delivery, a child of the trace
// context its request carries (the submit's, also on a redelivery to
// another worker after a crash, and on a parked run's wake). With tracing
// off it returns ctx and a noop span, allocating nothing.
func (t workerTracing) startClaim(ctx context.Context, d *delivery, runID, agent string) (context.Context, trace.Span) {
	if !t.on {
		return ctx, noopSpan
	}
	ctx = bus.ExtractTrace(ctx, d.msg.Headers())
	return t.tracer.Start(ctx, "claim", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		attribute.String("lovia.run_id", runID), attribute.String("lovia.agent", agent),
		attribute.Int64("lovia.delivery", int64(d.meta.NumDelivered)),
		attribute.Int64("lovia.request_seq", int64(d.meta.Sequence.Stream)),
	))
}

// endClaim ends a claim span with what the claim decided: claimed, or how
// the delivery was settled without running.
func (t workerTracing) endClaim(s trace.Span, claimed bool, v lifecycle.Verdict) {
	if !t.on {
		return
	}
	if claimed {
		s.SetAttributes(attribute.String("lovia.claim", "claimed"))
	} else {
		// Not an error: a duplicate, a stale or ended request, a release.
		s.SetAttributes(attribute.String("lovia.claim", v.Settle.String()))
		if v.Reason != "" {
			s.SetAttributes(attribute.String("lovia.claim_reason", v.Reason))
		}
	}
	s.End()
}
