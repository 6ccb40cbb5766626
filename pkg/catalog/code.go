package catalog

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// CodeSettings are the fleet settings of agents defined in Go (what an
// agents file gives each agent beside its loop definition).
type CodeSettings struct {
	// MaxTurns caps a run's turns unless the request sets its own.
	// Default 0: the fleet's default (bus.DefaultMaxTurns).
	MaxTurns int
	// ApprovalTimeout is how long a call waits for an approval decision.
	// Default DefaultApprovalTimeout.
	ApprovalTimeout time.Duration
}

// FromAgents builds a catalog of agents defined in Go: each *loop.Agent
// with everything the loop gives it (Go tools, guardrails, hooks, a Go
// output type, dynamic instructions, model settings, retry and context
// policies, agents as tools), and the code agents its handoffs lead to,
// collected through the whole handoff graph. Each is marked Code, with a
// Spec synthesized for listings (name, instructions, model, tool and
// handoff names). Two different agents of one name are an error naming
// it; so are an agent without a name, a provider or a model, and
// negative settings.
func FromAgents(agents []*loop.Agent, set CodeSettings) (*Catalog, error) {
	if set.MaxTurns < 0 {
		return nil, fmt.Errorf("code agents: MaxTurns %d is negative", set.MaxTurns)
	}
	if set.ApprovalTimeout < 0 {
		return nil, fmt.Errorf("code agents: ApprovalTimeout %s is negative", set.ApprovalTimeout)
	}
	if set.ApprovalTimeout == 0 {
		set.ApprovalTimeout = DefaultApprovalTimeout
	}
	c := &Catalog{agents: map[string]*Agent{}}
	seen := map[*loop.Agent]bool{}
	var errs []error
	queue := append([]*loop.Agent(nil), agents...)
	for len(queue) > 0 {
		a := queue[0]
		queue = queue[1:]
		if a == nil {
			errs = append(errs, errors.New("code agents: a nil *loop.Agent"))
			continue
		}
		if seen[a] {
			continue
		}
		seen[a] = true
		if err := checkCode(a); err != nil {
			errs = append(errs, err)
			continue
		}
		if _, dup := c.agents[a.Name]; dup {
			errs = append(errs, fmt.Errorf("agent %q is defined twice (two different *loop.Agent values of one name): rename one", a.Name))
			continue
		}
		c.agents[a.Name] = &Agent{Agent: a, Spec: codeSpec(a), MaxTurns: set.MaxTurns, ApprovalTimeout: set.ApprovalTimeout, Code: true}
		c.names = append(c.names, a.Name)
		for _, h := range a.Handoffs {
			if h.Agent != nil {
				queue = append(queue, h.Agent)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	sort.Strings(c.names)
	c.pinDigests()
	return c, nil
}

func checkCode(a *loop.Agent) error {
	switch {
	case !idRE.MatchString(a.Name):
		return fmt.Errorf("code agent %q: name must be 1-128 characters of [A-Za-z0-9_-]", a.Name)
	case a.Provider == nil && a.Model == "":
		return fmt.Errorf("code agent %q: set Agent.Provider or Agent.Model (demo, openai:<model>, anthropic:<model>, …)", a.Name)
	}
	return nil
}

// codeSpec is the Spec listings show for a code agent.
func codeSpec(a *loop.Agent) Spec {
	s := Spec{Name: a.Name, Instructions: a.Instructions, Model: a.Model}
	if s.Model == "" {
		s.Model = "code" // a provider value the program built
		if p, ok := a.Provider.(interface{ Name() string }); ok && p.Name() != "" {
			s.Model = p.Name()
		}
	}
	if s.Instructions == "" && a.InstructionsFunc != nil {
		s.Instructions = "(dynamic instructions)"
	}
	for _, t := range a.Tools {
		s.Tools = append(s.Tools, t.Name)
	}
	for _, h := range a.Handoffs {
		if h.Agent != nil {
			s.Handoffs = append(s.Handoffs, h.Agent.Name)
		}
	}
	return s
}

// Merge joins catalogs into one. An agent defined in two of them is an
// error naming it (and where each definition comes from: code or agents
// file). Nil catalogs are skipped.
func Merge(cats ...*Catalog) (*Catalog, error) {
	out := &Catalog{agents: map[string]*Agent{}}
	var dups []string
	for _, c := range cats {
		if c == nil {
			continue
		}
		for _, n := range c.names {
			a := c.agents[n]
			if prev, ok := out.agents[n]; ok {
				dups = append(dups, fmt.Sprintf("%q (%s and %s)", n, origin(prev), origin(a)))
				continue
			}
			out.agents[n] = a
			out.names = append(out.names, n)
		}
	}
	if len(dups) > 0 {
		return nil, fmt.Errorf("agent %s defined twice: give each agent one definition, or rename one", strings.Join(dups, ", "))
	}
	sort.Strings(out.names)
	return out, nil
}

// Overlay is base with over's agents added, over's winning a name both
// define; shadowed lists those names (a registry agent shadowed by a code
// agent of the program).
func Overlay(base, over *Catalog) (c *Catalog, shadowed []string) {
	if base == nil {
		return over, nil
	}
	out := &Catalog{agents: map[string]*Agent{}}
	for _, n := range base.names {
		if _, ok := over.agents[n]; ok {
			shadowed = append(shadowed, n)
			continue
		}
		out.agents[n] = base.agents[n]
		out.names = append(out.names, n)
	}
	for _, n := range over.names {
		out.agents[n] = over.agents[n]
		out.names = append(out.names, n)
	}
	sort.Strings(out.names)
	return out, shadowed
}

func origin(a *Agent) string {
	if a.Code {
		return "a code agent"
	}
	return "the agents file"
}
