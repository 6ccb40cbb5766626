package demo

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// trailingResults returns the tool results the view ends with.
func trailingResults(view []loop.Entry) []loop.Entry {
	i := len(view)
	for i > 0 && view[i-1].Kind == loop.KindToolResult {
		i--
	}
	return view[i:]
}

// lastUserText is the text of the view's last user input.
func lastUserText(view []loop.Entry) string {
	for i := len(view) - 1; i >= 0; i-- {
		if view[i].Kind == loop.KindInput && view[i].Role == loop.RoleUser {
			return strings.TrimSpace(view[i].ContentText())
		}
	}
	return ""
}

// fromResults answers from tool results, one sentence each, in the order
// of the calls they answer.
func (p *Provider) fromResults(view, results []loop.Entry) string {
	byCall := map[string]loop.Entry{}
	for _, r := range results {
		byCall[r.CallID] = r
	}
	// Results arrive in completion order; answer in the order of the calls
	// so that the answer does not depend on which tool finished first.
	var sentences []string
	for _, call := range view {
		r, ok := byCall[call.CallID]
		if call.Kind != loop.KindToolCall || !ok {
			continue
		}
		delete(byCall, call.CallID)
		sentences = append(sentences, p.sentence(call, r))
	}
	for _, r := range results { // results whose call is not in the view
		if _, ok := byCall[r.CallID]; ok {
			sentences = append(sentences, p.sentence(loop.Entry{Name: r.Name}, r))
		}
	}
	return strings.Join(sentences, " ")
}

// sentence answers from one tool result.
func (p *Provider) sentence(call, r loop.Entry) string {
	name := call.Name
	if name == "" {
		name = r.Name
	}
	out := trimDot(unquote(strings.TrimSpace(r.Output)))
	switch {
	case name == p.cfg.CalculatorTool:
		var args struct {
			Expression string `json:"expression"`
		}
		_ = json.Unmarshal([]byte(call.Arguments), &args)
		switch {
		case r.IsError:
			return fmt.Sprintf("I could not compute %s: %s.", args.Expression, out)
		case args.Expression != "":
			return fmt.Sprintf("%s = %s.", args.Expression, out)
		default:
			return fmt.Sprintf("The result is %s.", out)
		}
	case name == p.cfg.TimeTool:
		if r.IsError {
			return fmt.Sprintf("I could not read the clock: %s.", out)
		}
		return fmt.Sprintf("The current time is %s.", out)
	case r.IsError:
		return fmt.Sprintf("The %s tool failed: %s.", name, out)
	default:
		return fmt.Sprintf("The %s tool returned: %s.", name, out)
	}
}

// computed answers arithmetic without a calculator tool.
func computed(expr string) string {
	v, err := evaluate(expr)
	if err != nil {
		return fmt.Sprintf("I cannot compute %s: %v.", expr, err)
	}
	return fmt.Sprintf("%s = %s. (No calculator tool is available, so I worked it out myself.)", expr, formatNumber(v))
}

// reply answers anything that is neither arithmetic nor a time question.
func (p *Provider) reply(question string, tools []loop.ToolSchema) string {
	const intro = "I am the offline demo model of Lovia Fleet: I run without any network or real language model."
	var b strings.Builder
	switch {
	case question == "":
		b.WriteString(intro + " Ask me something.")
	case greeting(question):
		b.WriteString("Hello! " + intro)
	default:
		fmt.Fprintf(&b, "You said: %q. %s I cannot answer that for real, but I can echo it back to you.", clip(question, 200), intro)
	}
	var can []string
	if has(tools, p.cfg.CalculatorTool) {
		can = append(can, fmt.Sprintf("do arithmetic with the %s tool (try \"What is 12*7?\")", p.cfg.CalculatorTool))
	} else {
		can = append(can, "do simple arithmetic (try \"What is 12*7?\")")
	}
	if has(tools, p.cfg.TimeTool) {
		can = append(can, fmt.Sprintf("tell the time with the %s tool (try \"What time is it?\")", p.cfg.TimeTool))
	}
	b.WriteString(" I can " + strings.Join(can, " and ") + ". Configure a real model (for example openai:gpt-4.1-mini) for real answers.")
	return b.String()
}

func unquote(s string) string {
	var v string
	if strings.HasPrefix(s, `"`) && json.Unmarshal([]byte(s), &v) == nil {
		return v
	}
	return s
}

func trimDot(s string) string { return strings.TrimRight(s, ".") }

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
