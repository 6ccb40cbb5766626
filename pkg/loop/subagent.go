package loop

import (
	"context"
	"encoding/json"
	"fmt"
)

var askSchema = json.RawMessage(`{"type":"object","properties":{"input":{"type":"string","description":"The task or question for the agent."}},"required":["input"]}`)

// AsTool exposes a as a tool (default name "ask_<slug>") that runs an
// isolated sub-run: no parent history, the parent's deps, cancel token and
// tracer, its own mailbox, a copy of the parent's budget, and its usage
// folded into the parent's (also on failure). The tool returns the
// sub-run's output. SubRunLimits gives the sub-run its own max_turns and
// budget.
func (a *Agent) AsTool(name, description string, opts ...ToolOption) *Tool {
	if name == "" {
		name = "ask_" + slug(a.Name)
	}
	if description == "" {
		description = fmt.Sprintf("Ask the %s agent to do a task; it answers with its result.", a.Name)
	}
	t := &Tool{Name: name, Description: description, Parameters: askSchema}
	for _, o := range opts {
		o(t)
	}
	t.Func = func(ctx context.Context, rc *RunContext, args json.RawMessage) (any, error) {
		var in struct {
			Input string `json:"input"`
		}
		if err := json.Unmarshal(args, &in); err != nil || in.Input == "" {
			return nil, &InvalidToolArguments{Tool: name, Message: fmt.Sprintf("Invalid arguments for tool '%s': input: is required", name)}
		}
		runner := rc.runner
		if runner == nil {
			runner = NewRunner(RunnerConfig{})
		}
		ropts := []RunOption{WithDeps(rc.Deps), WithCancelToken(rc.CancelToken), WithParent(rc)}
		if rc.tracer != nil {
			ropts = append(ropts, WithTracer(rc.tracer))
		}
		switch {
		case t.sub != nil && t.sub.budget != nil:
			ropts = append(ropts, WithBudget(*t.sub.budget))
		case rc.Budget != nil:
			ropts = append(ropts, WithBudget(*rc.Budget))
		}
		if t.sub != nil && t.sub.maxTurns > 0 {
			ropts = append(ropts, WithMaxTurns(t.sub.maxTurns))
		}
		res, err := runner.Run(ctx, a, []Entry{UserText(in.Input)}, ropts...)
		if err != nil {
			return nil, err
		}
		return res.Output, nil
	}
	return t
}
