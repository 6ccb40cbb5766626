package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/service"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// TestSubmitSpan: a submit through the NATS API from inside a span (the
// SDK sends its traceparent) is a submit span under it, and the run's
// claim, run and turns follow under the submit, in one trace — the
// request carried the submit's trace context to the worker.
func TestSubmitSpan(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	f := fleettest.Start(t, fleettest.Options{
		AgentsYAML: `
agents:
  - name: calc
    model: scripted
    tools: [echo]
    script:
      - call: {name: echo, args: {text: "84"}, id: c1}
      - text: The answer is 84.
`,
		API:    func(c *service.Config) { c.Tracing = tp },
		Worker: func(c *worker.Config) { c.Tracing = tp },
	})
	ctx, caller := tp.Tracer("test").Start(context.Background(), "caller")
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "calc", Input: bus.TextInput("What is 12*7?")})
	require.NoError(t, err)
	caller.End()
	envs := f.Events(rep.RunID, 30*time.Second)
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)

	byName := map[string][]sdktrace.ReadOnlySpan{}
	deadline := time.Now().Add(10 * time.Second)
	for len(byName["run"]) == 0 && time.Now().Before(deadline) { // the run span ends after its last event
		byName = map[string][]sdktrace.ReadOnlySpan{}
		for _, s := range rec.Ended() {
			byName[s.Name()] = append(byName[s.Name()], s)
		}
		time.Sleep(10 * time.Millisecond)
	}
	one := func(name string) sdktrace.ReadOnlySpan {
		require.Len(t, byName[name], 1, name)
		s := byName[name][0]
		require.Equal(t, caller.SpanContext().TraceID(), s.SpanContext().TraceID(), "%s in the caller's trace", name)
		return s
	}
	submit, claim, run := one("submit"), one("claim"), one("run")
	require.Equal(t, caller.SpanContext().SpanID(), submit.Parent().SpanID(), "submit under the caller's span")
	require.Equal(t, trace.SpanKindProducer, submit.SpanKind())
	require.Equal(t, submit.SpanContext().SpanID(), claim.Parent().SpanID(), "claim under the submit")
	require.Equal(t, trace.SpanKindConsumer, claim.SpanKind())
	require.Equal(t, claim.SpanContext().SpanID(), run.Parent().SpanID(), "run under the claim")
	require.NotEmpty(t, byName["turn"])
	for _, s := range byName["turn"] {
		require.Equal(t, run.SpanContext().SpanID(), s.Parent().SpanID())
	}
}
