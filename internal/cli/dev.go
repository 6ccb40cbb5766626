package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

type calcIn struct {
	A int `json:"a" desc:"first addend"`
	B int `json:"b" desc:"second addend"`
}

// runDev runs an in-process example agent (scripted model) and prints its
// streamed events. The fleet issue replaces it with the full dev stack.
func runDev(ctx context.Context, env *Env, args []string) int {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	add := loop.NewTool("add", "Add two integers.", func(_ context.Context, _ *loop.RunContext, in calcIn) (int, error) {
		return in.A + in.B, nil
	})
	agent := &loop.Agent{
		Name:         "demo",
		Instructions: "You add numbers with the add tool.",
		Provider: scripted.New([]scripted.Step{
			scripted.CallTool("add", map[string]int{"a": 12, "b": 30}, "call_1"),
			scripted.Text("12 + 30 = 42. (This is a scripted example model.)"),
		}),
		Tools: []*loop.Tool{add},
	}
	h := loop.NewRunner(loop.RunnerConfig{}).Stream(ctx, agent, []loop.Entry{loop.UserText("What is 12 + 30?")})
	for ev := range h.Events() {
		printEvent(env, ev)
	}
	if _, err := h.Result(); err != nil {
		fmt.Fprintln(env.Stderr, "run failed:", err)
		return ExitFailure
	}
	return ExitOK
}

func printEvent(env *Env, ev loop.Event) {
	switch e := ev.(type) {
	case *loop.TextDelta:
		fmt.Fprint(env.Stdout, e.Delta)
		return
	case *loop.MessageCompleted:
		fmt.Fprintln(env.Stdout)
	case *loop.ToolCallStarted:
		fmt.Fprintf(env.Stdout, "→ %s(%s)\n", e.Call.Name, e.Call.Arguments)
	case *loop.ToolCallCompleted:
		fmt.Fprintf(env.Stdout, "← %s: %s\n", e.Call.Name, e.Output)
	case *loop.RunCompleted:
		fmt.Fprintf(env.Stdout, "[run_completed] turns=%d tokens=%d\n", e.Turns, e.Usage.TotalTokens)
	case *loop.RunFailed:
		fmt.Fprintf(env.Stdout, "[run_failed] %s: %s\n", e.Error.Type, e.Error.Message)
	default:
		fmt.Fprintf(env.Stdout, "[%s]\n", ev.Type())
	}
}
