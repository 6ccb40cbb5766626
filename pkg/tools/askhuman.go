package tools

import (
	"context"
	"strings"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

type askIn struct {
	Question string `json:"question" desc:"The question for a person: what you need to know, and why." jsonschema:"minLength=1,maxLength=4000"`
}

// AskHuman is the ask_human tool: the model asks a person a question and
// the run waits for the answer. It rides on approvals: the call is always
// gated, the approval_required event carries the question, and the answer
// is the reason of an approve decision (`lovia answer RUN_ID CALL_ID TEXT`,
// or the approve API with a reason) — so the wait is persisted, parks off
// the worker when it is long, can be answered from any client and resumed
// on any worker, and fails closed: no answer within the agent's
// approval_timeout (or a reject) is a tool result saying so, never an
// invented answer.
func AskHuman() *loop.Tool {
	t := loop.NewTool("ask_human", "Ask a person a question and wait for the answer. Use it when you need a fact, a preference or a decision only a person can give.",
		func(ctx context.Context, _ *loop.RunContext, in askIn) (string, error) {
			answer, ok := loop.ApprovalFrom(ctx)
			answer = strings.TrimSpace(answer)
			if !ok || answer == "" {
				return "", &loop.ToolError{Tool: "ask_human", Message: "the person gave no answer",
					Hint: "answer with lovia answer RUN_ID CALL_ID TEXT (an approve decision whose reason is the answer)"}
			}
			return answer, nil
		})
	t.NeedsApproval = true
	return t
}
