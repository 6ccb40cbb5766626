package loop_test

import (
	"context"
	"fmt"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

// A tool-calling agent: the model calls add, then answers from its result.
func Example_toolCallingAgent() {
	type addArgs struct {
		A int `json:"a" desc:"first addend"`
		B int `json:"b" desc:"second addend"`
	}
	add := loop.NewTool("add", "Add two integers.", func(_ context.Context, _ *loop.RunContext, in addArgs) (int, error) {
		return in.A + in.B, nil
	})
	agent := &loop.Agent{
		Name:         "calculator",
		Instructions: "Use the add tool for sums.",
		Tools:        []*loop.Tool{add},
		// A scripted model stands in for an LLM here.
		Provider: scripted.New([]scripted.Step{
			scripted.CallTool("add", map[string]int{"a": 2, "b": 3}, "c1"),
			scripted.Text("2 + 3 = 5"),
		}),
	}
	res, err := loop.NewRunner(loop.RunnerConfig{}).Run(context.Background(), agent, []loop.Entry{loop.UserText("What is 2 + 3?")})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println(res.Output, "| turns:", res.Turns)
	// Output: 2 + 3 = 5 | turns: 2
}

// Streaming events: text arrives as deltas; tools report start and end.
func Example_streaming() {
	agent := &loop.Agent{
		Name: "echo",
		Tools: []*loop.Tool{loop.NewTool("shout", "Upper-case text.", func(_ context.Context, _ *loop.RunContext, in struct{ Text string }) (string, error) {
			return "HI", nil
		})},
		Provider: scripted.New([]scripted.Step{scripted.CallTool("shout", map[string]string{"Text": "hi"}, "c1"), scripted.Text("It said HI.")}),
	}
	h := loop.NewRunner(loop.RunnerConfig{}).Stream(context.Background(), agent, []loop.Entry{loop.UserText("shout hi")})
	for ev := range h.Events() {
		switch e := ev.(type) {
		case *loop.ToolCallStarted:
			fmt.Println("tool start:", e.Call.Name)
		case *loop.ToolCallCompleted:
			fmt.Println("tool done:", e.Output)
		case *loop.TextDelta:
			fmt.Printf("delta %q\n", e.Delta)
		case *loop.RunCompleted:
			fmt.Println("completed:", e.Output)
		}
	}
	// Output:
	// tool start: shout
	// tool done: HI
	// delta "It "
	// delta "said "
	// delta "HI."
	// completed: It said HI.
}

// A handoff: triage transfers the conversation to a specialist, whose
// answer ends the run.
func Example_handoff() {
	billing := &loop.Agent{
		Name:         "billing",
		Instructions: "You handle invoices.",
		Provider:     scripted.New([]scripted.Step{scripted.Text("Your invoice is paid.")}, scripted.Sequential()),
	}
	triage := &loop.Agent{
		Name:     "triage",
		Handoffs: []loop.Handoff{loop.HandoffTo(billing)},
		Provider: scripted.New([]scripted.Step{scripted.CallTool("transfer_to_billing", map[string]string{"reason": "invoice question"}, "h1")}, scripted.Sequential()),
	}
	h := loop.NewRunner(loop.RunnerConfig{}).Stream(context.Background(), triage, []loop.Entry{loop.UserText("Is my invoice paid?")})
	for ev := range h.Events() {
		if e, ok := ev.(*loop.HandoffOccurred); ok {
			fmt.Println("handoff:", e.FromAgent, "->", e.ToAgent)
		}
	}
	res, _ := h.Result()
	fmt.Println(res.FinalAgent+":", res.Output)
	// Output:
	// handoff: triage -> billing
	// billing: Your invoice is paid.
}

// Structured output: the final answer must match a Go type's schema; the
// run's Output is that type. A malformed first answer gets one repair turn.
func Example_structuredOutput() {
	type Verdict struct {
		Sentiment string  `json:"sentiment" jsonschema:"enum=positive|negative|neutral"`
		Score     float64 `json:"score" jsonschema:"minimum=0,maximum=1"`
	}
	agent := &loop.Agent{
		Name:   "classifier",
		Output: loop.OutputFor[Verdict](),
		Provider: scripted.New([]scripted.Step{
			scripted.Text("I think it is positive!"),
			scripted.Text("```json\n{\"sentiment\": \"positive\", \"score\": 0.9}\n```"),
		}),
	}
	res, err := loop.NewRunner(loop.RunnerConfig{}).Run(context.Background(), agent, []loop.Entry{loop.UserText("I love it")})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	v := res.Output.(Verdict)
	fmt.Printf("%s %.1f after %d turns\n", v.Sentiment, v.Score, res.Turns)
	// Output: positive 0.9 after 2 turns
}
