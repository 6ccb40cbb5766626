package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// BenchmarkPublishTrace measures what the traceparent header costs an
// event publish: "off" is a run without trace context (tracing off: no
// header, nothing allocated for it), "on" one stamped by SetTrace.
func BenchmarkPublishTrace(b *testing.B) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	tc := bus.TraceContextOf(trace.ContextWithSpanContext(context.Background(), sc))
	for _, mode := range []string{"off", "on"} {
		b.Run(mode, func(b *testing.B) {
			tb := provisionedB(b)
			pub, err := bus.NewPublisher(tb.js, bus.PublisherConfig{})
			require.NoError(b, err)
			ctx := context.Background()
			rp, err := pub.Open(ctx, "bench-trace-"+mode, bus.JSON)
			require.NoError(b, err)
			if mode == "on" {
				rp.SetTrace(tc)
			}
			ev := &loop.TextDelta{EventHeader: hdr("demo", 3), Delta: "a token or two "}
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				if _, err := rp.Publish(ctx, ev); err != nil {
					b.Fatal(err)
				}
			}
			require.NoError(b, rp.Flush(ctx))
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
		})
	}
}
