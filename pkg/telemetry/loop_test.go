package telemetry_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
	"github.com/lovia-fleet/lovia/pkg/telemetry"
)

// recorded returns a tracer provider that keeps every ended span.
func recorded(t *testing.T) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, rec
}

// TestLoopSpans: through LoopTracer, a run with a handoff and a tool call
// makes OpenTelemetry spans nested as the loop runs them — run under the
// caller's span, turns under the run, model and tool calls and the
// handoff under their turn — and a tool is called with its tool_call
// span's context, so what it opens (here with StartChild) nests under it.
func TestLoopSpans(t *testing.T) {
	t.Parallel()
	tp, rec := recorded(t)
	lookup := loop.NewTool("lookup", "Look up an invoice.", func(ctx context.Context, _ *loop.RunContext, in struct{ ID string }) (string, error) {
		_, span := telemetry.StartChild(ctx, "lookup_db", trace.SpanKindClient)
		defer span.End()
		return "invoice " + in.ID + ": paid", nil
	})
	billing := &loop.Agent{Name: "billing", Tools: []*loop.Tool{lookup}, Provider: scripted.New([]scripted.Step{
		scripted.CallTool("lookup", map[string]string{"ID": "42"}, "c1"), scripted.Text("It is paid."),
	}, scripted.Sequential())}
	triage := &loop.Agent{Name: "triage", Handoffs: []loop.Handoff{loop.HandoffTo(billing)}, Provider: scripted.New([]scripted.Step{
		scripted.CallTool("transfer_to_billing", map[string]string{}, "h1"),
	}, scripted.Sequential())}

	ctx, claim := tp.Tracer("test").Start(context.Background(), "claim")
	r := loop.NewRunner(loop.RunnerConfig{Tracer: telemetry.LoopTracer(tp)})
	res, err := r.Run(ctx, triage, []loop.Entry{loop.UserText("was invoice 42 paid?")})
	require.NoError(t, err)
	require.Equal(t, "It is paid.", res.Output)
	claim.End()

	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		byID[s.SpanContext().SpanID()] = s
		byName[s.Name()] = append(byName[s.Name()], s)
		require.Equal(t, claim.SpanContext().TraceID(), s.SpanContext().TraceID(), "%s is in the caller's trace", s.Name())
	}
	parent := func(s sdktrace.ReadOnlySpan) string {
		p, ok := byID[s.Parent().SpanID()]
		if !ok {
			return ""
		}
		return p.Name()
	}
	require.Len(t, byName["run"], 1)
	run := byName["run"][0]
	require.Equal(t, "claim", parent(run))
	require.Contains(t, run.Attributes(), attr("lovia.agent", "triage"))
	require.Len(t, byName["turn"], 3, "the handoff's turn, the lookup's, the answer's")
	for _, s := range byName["turn"] {
		require.Equal(t, "run", parent(s))
	}
	require.Len(t, byName["model_call"], 3)
	for _, s := range byName["model_call"] {
		require.Equal(t, "turn", parent(s))
	}
	require.Len(t, byName["tool_call"], 2)
	for _, s := range byName["tool_call"] {
		require.Equal(t, "turn", parent(s))
	}
	require.Len(t, byName["handoff"], 1)
	require.Equal(t, "turn", parent(byName["handoff"][0]))
	require.Contains(t, byName["handoff"][0].Attributes(), attr("lovia.to", "billing"))
	require.Len(t, byName["lookup_db"], 1)
	db := byName["lookup_db"][0]
	toolCall := byID[db.Parent().SpanID()]
	require.Equal(t, "tool_call", toolCall.Name(), "the tool's span nests under its tool_call")
	require.Contains(t, toolCall.Attributes(), attr("lovia.tool", "lookup"))
	require.Contains(t, toolCall.Attributes(), attr("lovia.call_id", "c1"))
}

// TestErrorSpans: a span that ends with an error records it.
func TestErrorSpans(t *testing.T) {
	t.Parallel()
	tp, rec := recorded(t)
	failing := &loop.Agent{Name: "a", Provider: scripted.New(nil, scripted.Sequential())} // no step: the model call fails
	r := loop.NewRunner(loop.RunnerConfig{Tracer: telemetry.LoopTracer(tp)})
	_, err := r.Run(context.Background(), failing, []loop.Entry{loop.UserText("hi")}, loop.WithRetry(&loop.RetryPolicy{MaxAttempts: 1}))
	require.Error(t, err)
	var runSpan sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "run" {
			runSpan = s
		}
	}
	require.NotNil(t, runSpan)
	require.Equal(t, "Error", runSpan.Status().Code.String())
	require.NotEmpty(t, runSpan.Events(), "the error is recorded as an exception event")
}

// TestNoopCostsNothing: with a noop (or no) provider the loop gets its own
// NoopTracer, which it skips, and the helpers the fleet calls on every
// run, event and tool call allocate nothing.
func TestNoopCostsNothing(t *testing.T) { // not parallel: AllocsPerRun
	require.Equal(t, loop.Tracer(loop.NoopTracer{}), telemetry.LoopTracer(nil))
	require.Equal(t, loop.Tracer(loop.NoopTracer{}), telemetry.LoopTracer(noop.NewTracerProvider()))
	require.True(t, telemetry.IsNoop(nil))
	require.True(t, telemetry.IsNoop(noop.NewTracerProvider()))
	tp, _ := recorded(t)
	require.False(t, telemetry.IsNoop(tp))

	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		c, span := telemetry.StartChild(ctx, "x", trace.SpanKindClient)
		telemetry.EndSpan(span, nil)
		tc := bus.TraceContextOf(c)
		if !tc.IsZero() {
			panic("a context without a span has no trace context")
		}
		_ = bus.ExtractTrace(c, nil)
	})
	require.Zero(t, allocs)
}

func attr(k, v string) attribute.KeyValue { return attribute.String(k, v) }
