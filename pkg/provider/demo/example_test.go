package demo_test

import (
	"context"
	"fmt"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/provider"
	"github.com/lovia-fleet/lovia/pkg/provider/demo"
)

// The deltas the demo model streams: a tool call for an arithmetic
// question, then, once the view ends with the tool's result, the answer
// word by word.
func ExampleProvider_Stream() {
	p, _ := demo.New(demo.Config{})
	print := func(d loop.Delta) error {
		switch d.Kind {
		case loop.DeltaToolCall:
			fmt.Printf("tool call %s %s(%s)\n", d.CallID, d.Name, d.Arguments)
		case loop.DeltaText:
			fmt.Printf("text %q\n", d.Text)
		case loop.DeltaFinish:
			fmt.Println("finish", d.Finish)
		}
		return nil
	}
	tools := []loop.ToolSchema{{Name: "calculator"}, {Name: "time_now"}}
	ctx := context.Background()

	view := []loop.Entry{loop.UserText("What is 12*7?")}
	_ = p.Stream(ctx, &loop.ModelRequest{Entries: view, Tools: tools}, print)

	view = append(view,
		loop.ToolCallEntry("demo_call_1", "calculator", `{"expression":"12*7"}`),
		loop.ToolResultEntry("demo_call_1", "calculator", "84", false))
	_ = p.Stream(ctx, &loop.ModelRequest{Entries: view, Tools: tools}, print)
	// Output:
	// tool call demo_call_1 calculator({"expression":"12*7"})
	// finish tool_calls
	// text "12*7"
	// text " ="
	// text " 84."
	// finish stop
}

type expression struct {
	Expression string `json:"expression"`
}

// Define an agent on the "demo" model string, run it, and read the result.
func Example() {
	calculator := loop.NewTool("calculator", "Evaluate arithmetic.", func(_ context.Context, _ *loop.RunContext, in expression) (int, error) {
		return 84, nil // a real calculator evaluates in.Expression
	})
	runner := loop.NewRunner(loop.RunnerConfig{Registry: provider.NewRegistry(provider.Config{})})
	agent := &loop.Agent{Name: "assistant", Model: "demo", Tools: []*loop.Tool{calculator}}

	res, err := runner.Run(context.Background(), agent, []loop.Entry{loop.UserText("What is 12*7?")})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Output)
	fmt.Println(res.Turns, "turns")
	// Output:
	// 12*7 = 84.
	// 2 turns
}
