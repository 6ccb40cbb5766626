package catalog

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// AsToolSpec is one entry of an agent's `as_tools:` list: another agent
// of the file offered as a tool, ask_<agent>, that runs it on a task and
// answers with its output. The sub-run starts with no history and has its
// own max_turns and budget. An entry is the agent's name, or a map:
//
//	as_tools:
//	  - researcher
//	  - agent: writer
//	    max_turns: 5
//	    budget: {max_total_tokens: 20000}
type AsToolSpec struct {
	Agent string `yaml:"agent" json:"agent"`
	// Description is what the model reads about the tool (default: "Ask
	// the <agent> agent to do a task; it answers with its result.").
	Description string `yaml:"description" json:"description,omitempty"`
	// MaxTurns caps the sub-run's turns (0: the agent's own max_turns).
	MaxTurns int `yaml:"max_turns" json:"max_turns,omitempty"`
	// Budget caps the sub-run (unset: what is left of the asking run's).
	Budget *BudgetSpec `yaml:"budget" json:"budget,omitempty"`

	line int
}

// BudgetSpec caps a run; unset fields are unlimited.
type BudgetSpec struct {
	MaxInputTokens  int64    `yaml:"max_input_tokens" json:"max_input_tokens,omitempty"`
	MaxOutputTokens int64    `yaml:"max_output_tokens" json:"max_output_tokens,omitempty"`
	MaxTotalTokens  int64    `yaml:"max_total_tokens" json:"max_total_tokens,omitempty"`
	MaxToolCalls    int      `yaml:"max_tool_calls" json:"max_tool_calls,omitempty"`
	MaxDuration     Duration `yaml:"max_duration" json:"max_duration,omitempty"`
}

// UnmarshalYAML decodes an agent name or the entry's map.
func (t *AsToolSpec) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		*t = AsToolSpec{Agent: n.Value, line: n.Line}
		return nil
	}
	if err := checkKeys(n, reflect.TypeFor[AsToolSpec](), "an as_tools entry", "as_tools: [researcher]"); err != nil {
		return err
	}
	type plain AsToolSpec
	if err := n.Decode((*plain)(t)); err != nil {
		return err
	}
	t.line = n.Line
	if t.Budget != nil {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == "budget" {
				if err := checkKeys(n.Content[i+1], reflect.TypeFor[BudgetSpec](), "an as_tools budget", "budget: {max_total_tokens: 20000}"); err != nil {
					return err
				}
			}
		}
	}
	return atLine(t.validate(), n)
}

func (t *AsToolSpec) validate() error {
	switch {
	case t.Agent == "":
		return fieldErr("as_tools.agent", "missing: name the agent to offer as a tool")
	case t.MaxTurns < 0:
		return fieldErr("as_tools.max_turns", "%d is negative", t.MaxTurns)
	}
	if b := t.Budget; b != nil && (b.MaxInputTokens < 0 || b.MaxOutputTokens < 0 || b.MaxTotalTokens < 0 || b.MaxToolCalls < 0) {
		return fieldErr("as_tools.budget", "a limit is negative (leave a limit out for none)")
	}
	return nil
}

// where names the entry i of agent s's as_tools and its line.
func (t *AsToolSpec) where(i int) string {
	if t.line > 0 {
		return fmt.Sprintf("as_tools[%d] (line %d)", i, t.line)
	}
	return fmt.Sprintf("as_tools[%d]", i)
}

// askToolName is the tool name of agent as a tool (as loop.Agent.AsTool
// names it): ask_ and the name lowercased, other characters as one _.
func askToolName(agent string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(agent) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else if s := b.String(); s != "" && !strings.HasSuffix(s, "_") {
			b.WriteByte('_')
		}
	}
	return "ask_" + strings.TrimRight(b.String(), "_")
}

// linkAsTools gives every agent its as_tools, once all are built:
// unknown agents, an agent asking itself, cycles (a asks b, b asks a)
// and tool names already taken are errors.
func (c *Catalog) linkAsTools() []error {
	var errs []error
	for _, n := range c.names {
		a := c.agents[n]
		taken := map[string]bool{}
		for _, t := range a.Tools {
			taken[t.Name] = true
		}
		for i, at := range a.Spec.AsTools {
			if err := at.validate(); err != nil {
				errs = append(errs, fmt.Errorf("agent %q: %s: %w", n, at.where(i), err))
				continue
			}
			target, ok := c.agents[at.Agent]
			if !ok {
				errs = append(errs, fmt.Errorf("agent %q: %s: unknown agent %q (known: %s)", n, at.where(i), at.Agent, strings.Join(c.namesSorted(), ", ")))
				continue
			}
			name := askToolName(at.Agent)
			if taken[name] {
				errs = append(errs, fmt.Errorf("agent %q: %s: the tool name %s is taken (by another tool or as_tools entry of the agent)", n, at.where(i), name))
				continue
			}
			taken[name] = true
			maxTurns := at.MaxTurns
			if maxTurns == 0 {
				maxTurns = target.MaxTurns
			}
			var budget *loop.Budget
			if b := at.Budget; b != nil {
				budget = &loop.Budget{MaxInputTokens: b.MaxInputTokens, MaxOutputTokens: b.MaxOutputTokens, MaxTotalTokens: b.MaxTotalTokens,
					MaxToolCalls: b.MaxToolCalls, MaxDuration: time.Duration(b.MaxDuration)}
			}
			t := target.AsTool(name, at.Description, loop.SubRunLimits(maxTurns, budget))
			t.NeedsApproval = matchesAny(a.Spec.Approval, name)
			a.Tools = append(a.Tools, t)
		}
	}
	if len(errs) > 0 {
		return errs
	}
	// A cycle would let agents ask each other without end.
	state := map[string]int{} // 1: on the path, 2: done
	var visit func(n string, path []string) error
	visit = func(n string, path []string) error {
		switch state[n] {
		case 1:
			i := 0
			for path[i] != n {
				i++
			}
			return fmt.Errorf("agent %q: as_tools make a cycle (%s): an agent may not ask itself, directly or through others", n, strings.Join(append(path[i:], n), " asks "))
		case 2:
			return nil
		}
		state[n] = 1
		for _, at := range c.agents[n].Spec.AsTools {
			if err := visit(at.Agent, append(path, n)); err != nil {
				return err
			}
		}
		state[n] = 2
		return nil
	}
	for _, n := range c.namesSorted() {
		if err := visit(n, nil); err != nil {
			return []error{err}
		}
	}
	return nil
}

// asToolNames are the tool names of s's as_tools.
func asToolNames(s Spec) []string {
	out := make([]string, 0, len(s.AsTools))
	for _, at := range s.AsTools {
		out = append(out, askToolName(at.Agent))
	}
	return out
}
