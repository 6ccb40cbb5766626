package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// TestParkedRunKeepsItsTrace: a run request carrying a traceparent (a raw
// publish in a caller's trace) is claimed in a claim span under it; the
// run parks on an approval, and the decision's wake republishes the
// request with the same trace context, so the second claim — and the
// resumed run under it — are in the caller's trace, under the caller's
// span, like the first.
func TestParkedRunKeepsItsTrace(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: parkAgents, Worker: func(c *worker.Config) {
		c.ParkAfter = 200 * time.Millisecond
		c.Tracing = tp
	}})
	ctx := context.Background()
	callerCtx, caller := tp.Tracer("test").Start(ctx, "caller")
	caller.End()
	const runID = "traced-park"
	body, err := bus.Marshal(bus.JSON, &bus.RunRequest{RunID: runID, Agent: "gated", Input: bus.TextInput("deploy")})
	require.NoError(t, err)
	names, _ := bus.NewNames("")
	_, err = bus.PublishRequest(ctx, f.JS, names, "gated", body, bus.RequestMeta{
		RunID: runID, ContentType: bus.ContentTypeJSON, Trace: bus.TraceContextOf(callerCtx),
	})
	require.NoError(t, err)
	waitEvent(t, f, runID, loop.EventApprovalRequired, 10*time.Second)
	waitParked(t, f, runID)
	_, err = f.Client.Approve(ctx, runID, "c1", loop.Approve, "go")
	require.NoError(t, err)
	envs := f.Events(runID, 15*time.Second)
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)

	var claims, runs []sdktrace.ReadOnlySpan
	require.True(t, waitFor(10*time.Second, func() bool {
		claims, runs = nil, nil
		for _, s := range rec.Ended() {
			switch s.Name() {
			case "claim":
				claims = append(claims, s)
			case "run":
				runs = append(runs, s)
			}
		}
		return len(claims) == 2 && len(runs) == 2
	}), "waiting for two claims and two runs (the park and the resume), got %d and %d", len(claims), len(runs))
	for i, c := range claims {
		require.Equal(t, caller.SpanContext().TraceID(), c.SpanContext().TraceID(), "claim %d is in the caller's trace", i)
		require.Equal(t, caller.SpanContext().SpanID(), c.Parent().SpanID(), "claim %d is under the caller's span", i)
	}
	for _, r := range runs {
		require.Equal(t, caller.SpanContext().TraceID(), r.SpanContext().TraceID())
	}
}
