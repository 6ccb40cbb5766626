package lovia_test

import (
	"context"
	"fmt"

	"github.com/lovia-fleet/lovia"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

type Sum struct{ A, B int }

// A program with one agent and one Go tool, run once on an in-process
// fleet. The scripted model stands in for a real one: it calls add, then
// answers.
func Example() {
	add := loop.NewTool("add", "add two numbers", func(_ context.Context, _ *loop.RunContext, in Sum) (int, error) {
		return in.A + in.B, nil
	})
	model := scripted.New([]scripted.Step{scripted.CallTool("add", Sum{A: 2, B: 3}, "c1"), scripted.Text("2 + 3 = 5")}, scripted.ForAgent("assistant"))
	cfg := lovia.Config{Agents: []*loop.Agent{{Name: "assistant", Provider: model, Tools: []*loop.Tool{add}}}}
	out, err := lovia.Once(context.Background(), cfg, "assistant", "what is 2 + 3?")
	fmt.Println(out, err)
	// Output: 2 + 3 = 5 <nil>
}

// The hello world of a worker: `go run .` serves the agent on the fleet
// of $NATS_URL, `go run . dev` on an embedded one, and
// `go run . run --agent assistant "what is 2 + 3?"` submits a run.
func ExampleMain() {
	add := loop.NewTool("add", "add two numbers", func(_ context.Context, _ *loop.RunContext, in Sum) (int, error) {
		return in.A + in.B, nil
	})
	lovia.Main(lovia.Config{Agents: []*loop.Agent{{
		Name: "assistant", Instructions: "Use add for sums.", Model: "openai:gpt-4.1-mini", Tools: []*loop.Tool{add},
	}}})
}
