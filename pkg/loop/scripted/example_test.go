package scripted_test

import (
	"context"
	"fmt"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

// A scripted model drives a run the way an LLM would: its first turn calls
// a tool, its second answers. The events are the ones a real model's run
// produces, and the provider records what the model was sent.
func Example() {
	type weatherArgs struct {
		City string `json:"city" desc:"city name"`
	}
	weather := loop.NewTool("weather", "Current weather in a city.", func(_ context.Context, _ *loop.RunContext, in weatherArgs) (string, error) {
		return "18°C and sunny in " + in.City, nil
	})
	model := scripted.New([]scripted.Step{
		scripted.CallTool("weather", map[string]string{"city": "Lisbon"}, "call_1"),
		scripted.Text("It is sunny in Lisbon."),
	})
	agent := &loop.Agent{Name: "forecaster", Tools: []*loop.Tool{weather}, Provider: model}

	h := loop.NewRunner(loop.RunnerConfig{}).Stream(context.Background(), agent, []loop.Entry{loop.UserText("Weather in Lisbon?")})
	for ev := range h.Events() {
		switch e := ev.(type) {
		case *loop.ToolCallStarted:
			fmt.Println(e.Type(), e.Call.Name, e.Call.Arguments)
		case *loop.ToolCallCompleted:
			fmt.Println(e.Type(), e.Output)
		case *loop.TextDelta:
			fmt.Printf("%s %q\n", e.Type(), e.Delta)
		case *loop.RunCompleted:
			fmt.Println(e.Type(), e.Output)
		}
	}
	res, err := h.Result()
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println("turns:", res.Turns, "model calls:", model.Calls())

	// The second request carried the tool's result back to the model.
	second := model.Requests()[1].Entries
	last := second[len(second)-1]
	fmt.Println(last.Kind, last.CallID, last.Output)
	// Output:
	// tool_call_started weather {"city":"Lisbon"}
	// tool_call_completed 18°C and sunny in Lisbon
	// text_delta "It "
	// text_delta "is "
	// text_delta "sunny "
	// text_delta "in "
	// text_delta "Lisbon."
	// run_completed It is sunny in Lisbon.
	// turns: 2 model calls: 2
	// tool_result call_1 18°C and sunny in Lisbon
}
