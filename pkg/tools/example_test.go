package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/tools"
)

// A built-in tool is a *loop.Tool: the loop shows the model its schema and
// calls its Func with the model's JSON arguments.
func ExampleBuiltin() {
	ts, err := tools.Builtin(tools.Config{Workspace: "workspace"})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println(ts.Names())

	calc := ts["calculator"]
	fmt.Println(calc.Schema().Name+":", calc.Schema().Description)
	out, err := calc.Func(context.Background(), nil, json.RawMessage(`{"expression": "(12*7)+3^2"}`))
	fmt.Println(out, err)
	// Output:
	// [append_file ask_human calculator echo read_file sleep time_now]
	// calculator: Evaluate an arithmetic expression (+ - * / % ^ and parentheses).
	// 93 <nil>
}

// Failures are errors the model sees: arguments that do not match the
// schema never reach the tool, and the tool's own errors carry a hint.
func ExampleBuiltin_errors() {
	ts, _ := tools.Builtin(tools.Config{})
	calc := ts["calculator"]

	_, err := calc.Func(context.Background(), nil, json.RawMessage(`{}`))
	fmt.Println(errors.Is(err, loop.ErrInvalidToolArgs))

	_, err = calc.Func(context.Background(), nil, json.RawMessage(`{"expression": "2 +"}`))
	var te *loop.ToolError
	if errors.As(err, &te) {
		fmt.Println(te.Tool, "hint:", te.Hint)
	}
	// Output:
	// true
	// calculator hint: use numbers, + - * / % ^ and parentheses
}

// Select picks tools for an agent; time_now reads the configured clock.
func ExampleSet_Select() {
	ts, _ := tools.Builtin(tools.Config{Now: func() time.Time { return time.Date(2025, 7, 1, 12, 0, 0, 0, time.UTC) }})
	picked, err := ts.Select("time_now", "echo")
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	args := map[string]string{"time_now": `{}`, "echo": `{"text": "hello"}`}
	for _, t := range picked {
		out, err := t.Func(context.Background(), nil, json.RawMessage(args[t.Name]))
		fmt.Println(t.Name, out, err)
	}
	_, err = ts.Select("shell")
	fmt.Println(err)
	// Output:
	// time_now 2025-07-01T12:00:00Z <nil>
	// echo hello <nil>
	// unknown tool "shell" (known: append_file, ask_human, calculator, echo, read_file, sleep, time_now)
}

func ExampleEval() {
	v, err := tools.Eval("2^10 / 4 - 0.5")
	fmt.Println(tools.FormatNumber(v), err)
	// Output: 255.5 <nil>
}
