package telemetry_test

import (
	"context"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
	"github.com/lovia-fleet/lovia/pkg/telemetry"
)

// A run traced through LoopTracer: each span as it ends. In a process the
// provider comes from otlp.New (the OTEL_* environment) and is passed to
// worker.Config.Tracing, which does this.
func ExampleLoopTracer() {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()

	clock := loop.NewTool("clock", "The time.", func(context.Context, *loop.RunContext, struct{}) (string, error) {
		return "12:00", nil
	})
	agent := &loop.Agent{Name: "demo", Tools: []*loop.Tool{clock}, Provider: scripted.New([]scripted.Step{
		scripted.CallTool("clock", map[string]string{}, "c1"), scripted.Text("It is noon."),
	}, scripted.Sequential())}
	r := loop.NewRunner(loop.RunnerConfig{Tracer: telemetry.LoopTracer(tp)})
	if _, err := r.Run(context.Background(), agent, []loop.Entry{loop.UserText("time?")}); err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range rec.Ended() {
		fmt.Println(s.Name())
	}
	// Output:
	// model_call
	// tool_call
	// turn
	// model_call
	// turn
	// run
}
