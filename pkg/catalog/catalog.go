package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/compaction"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
	"github.com/lovia-fleet/lovia/pkg/tools"
	"github.com/lovia-fleet/lovia/pkg/tools/mcp"
)

// DefaultApprovalTimeout is the approval timeout of agents that set none.
const DefaultApprovalTimeout = 10 * time.Minute

// Options are what agents are built from.
type Options struct {
	// Tools is the tool set agents pick from by name.
	Tools tools.Set
	// Registry resolves model strings (demo, openai:…, anthropic:…, bare).
	Registry *loop.Registry
	// MCP provides the tools of the file's MCP servers (an mcp.Manager
	// started for [File.Servers]). Required when the file declares MCP
	// servers, unless MCPUnresolved is set.
	MCP ToolSource
	// MCPUnresolved builds agents without their MCP tools and accepts MCP
	// tool names without checking them, for processes that list agents but
	// never run them (the gateway).
	MCPUnresolved bool
	// Services provides the tools of the fleet's NATS tool services (a
	// toolsvc.Registry started before the catalog is built); nil: agents
	// cannot name tool-service tools.
	Services ServiceSource
	// Plugins gives the fleet-native plugins their JetStream stores
	// (plugins.go); without it agents with those plugins fail at run
	// start, saying so.
	Plugins PluginStores
	// Compaction builds the context policy of an agent whose `compaction:`
	// section tunes it, from the section's thresholds (cfg has no store
	// nor logger: the builder adds the process's). Nil: compaction.New(cfg),
	// whose recall reads the transcript.
	Compaction func(cfg compaction.Config) (loop.ContextPolicy, error)
}

// Agent is one ready agent with its fleet settings.
type Agent struct {
	*loop.Agent
	Spec            Spec
	MaxTurns        int
	ApprovalTimeout time.Duration
	// digest is the definition's digest as it was built (version.go).
	digest string
	// Code marks an agent defined in Go (FromAgents), not by an agents
	// file or the registry.
	Code bool
}

// Info describes an agent for listings.
type Info struct {
	Name     string   `json:"name" msgpack:"name"`
	Model    string   `json:"model" msgpack:"model"`
	Tools    []string `json:"tools" msgpack:"tools"`
	Handoffs []string `json:"handoffs" msgpack:"handoffs"`
}

// Catalog is an immutable set of agents by name.
type Catalog struct {
	agents map[string]*Agent
	names  []string
}

// Get returns the agent named name.
func (c *Catalog) Get(name string) (*Agent, bool) {
	a, ok := c.agents[name]
	return a, ok
}

// Names returns the agent names, sorted.
func (c *Catalog) Names() []string { return append([]string(nil), c.names...) }

// Infos lists the agents, sorted by name.
func (c *Catalog) Infos() []Info {
	out := make([]Info, 0, len(c.names))
	for _, n := range c.names {
		s := c.agents[n].Spec
		out = append(out, Info{Name: n, Model: s.Model, Tools: nonNil(s.Tools), Handoffs: nonNil(s.Handoffs)})
	}
	return out
}

// AgentInfos describes the agents as the agents list (`<p>.api.agents`,
// GET /v1/agents) and the fleet announcements give them: each with its
// instructions (capped at bus.MaxAgentInstructions) and its resolved tools'
// schemas, sorted by name.
func (c *Catalog) AgentInfos() []bus.AgentInfo {
	out := make([]bus.AgentInfo, 0, len(c.names))
	for _, in := range c.Infos() {
		out = append(out, bus.AgentInfo{Name: in.Name, Model: in.Model, Tools: in.Tools, Handoffs: in.Handoffs,
			Instructions: capText(c.agents[in.Name].Spec.Instructions, bus.MaxAgentInstructions), Schemas: c.ToolSchemas(in.Name)})
	}
	return out
}

// capText cuts s to at most n bytes, on a rune boundary, marking the cut.
func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "\n…(cut)"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Load reads and builds an agents file.
func Load(path string, opts Options) (*Catalog, error) {
	f, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := Build(f, opts)
	if err != nil {
		return nil, fmt.Errorf("agents file %s: %w", path, err)
	}
	return c, nil
}

// ReadFile reads and decodes an agents file without building it: a worker
// reads it first to start the MCP servers it declares ([File.Servers]),
// then builds it with [Build]. The agents' instructions_file are read
// into their instructions ([File.ReadInstructionFiles]).
func ReadFile(path string) (File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return File{}, fmt.Errorf("agents file: %w", err)
	}
	f, err := Decode(data)
	if err != nil {
		return File{}, fmt.Errorf("agents file %s: %w", path, err)
	}
	if err := f.ReadInstructionFiles(filepath.Dir(path)); err != nil {
		return File{}, fmt.Errorf("agents file %s: %w", path, err)
	}
	return f, nil
}

// Decode decodes an agents file (unknown keys are errors naming the known
// ones).
func Decode(data []byte) (File, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return File{}, explainYAML(err, data)
	}
	for i, l := range agentLines(data) {
		if i < len(f.Agents) {
			f.Agents[i].lines = l
		}
	}
	return f, nil
}

// DemoSpec is the built-in demo agent.
var DemoSpec = Spec{
	Name:         "demo",
	Instructions: "You are the Lovia Fleet demo agent. Use calculator for arithmetic and time_now for the time.",
	Model:        "demo",
	Tools:        []string{"calculator", "time_now"},
}

// Empty is a catalog with no agent (an agents registry whose agents were
// all removed: a worker serving it claims nothing).
func Empty() *Catalog { return &Catalog{agents: map[string]*Agent{}} }

// Default returns the catalog with only the built-in demo agent.
func Default(opts Options) (*Catalog, error) {
	return Build(File{Agents: []Spec{DemoSpec}}, opts)
}

// Parse builds agents from YAML (unknown fields are errors).
func Parse(data []byte, opts Options) (*Catalog, error) {
	f, err := Decode(data)
	if err != nil {
		return nil, err
	}
	return Build(f, opts)
}

var idRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// Build validates specs and builds the agents.
func Build(f File, opts Options) (*Catalog, error) {
	if len(f.Agents) == 0 {
		return nil, errors.New("no agents: the file needs an `agents:` list with at least one agent")
	}
	servers, err := f.Servers()
	if err != nil {
		return nil, err
	}
	if len(servers) > 0 && opts.MCP == nil && !opts.MCPUnresolved {
		return nil, fmt.Errorf("the file declares MCP servers (%s) but no MCP tool source is configured: start an mcp.Manager for File.Servers() and pass it as Options.MCP", strings.Join(sortedKeys(servers), ", "))
	}
	if opts.MCPUnresolved {
		opts.MCP, opts.Services = nil, nil
	}
	shared := sortedKeys(f.MCPServers)
	c := &Catalog{agents: map[string]*Agent{}}
	var errs []error
	for i, s := range f.Agents {
		where := fmt.Sprintf("agents[%d]", i)
		if s.Name != "" {
			where = fmt.Sprintf("agent %q", s.Name)
		}
		if !idRE.MatchString(s.Name) {
			errs = append(errs, fmt.Errorf("%s: name must be 1-128 characters of [A-Za-z0-9_-]", where))
			continue
		}
		if _, dup := c.agents[s.Name]; dup {
			errs = append(errs, fmt.Errorf("%s: defined twice", where))
			continue
		}
		visible := append(append([]string(nil), shared...), sortedKeys(s.MCPServers)...)
		sort.Strings(visible)
		a, err := build(s, visible, opts)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		c.agents[s.Name] = a
		c.names = append(c.names, s.Name)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	errs = append(errs, c.linkAsTools()...)
	// Link handoffs by name.
	for _, n := range c.names {
		a := c.agents[n]
		for _, h := range a.Spec.Handoffs {
			t, ok := c.agents[h]
			if !ok {
				errs = append(errs, fmt.Errorf("agent %q: handoff to unknown agent %q (known: %s)", n, h, strings.Join(c.namesSorted(), ", ")))
				continue
			}
			a.Handoffs = append(a.Handoffs, loop.HandoffTo(t.Agent))
		}
	}
	for _, n := range c.names {
		if err := checkScript(c.agents[n]); err != nil {
			errs = append(errs, fmt.Errorf("agent %q: %w", n, err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	sort.Strings(c.names)
	c.pinDigests()
	return c, nil
}

func (c *Catalog) namesSorted() []string {
	n := append([]string(nil), c.names...)
	sort.Strings(n)
	return n
}

func build(s Spec, visible []string, opts Options) (*Agent, error) {
	a := &loop.Agent{Name: s.Name, Instructions: s.Instructions}
	if s.InstructionsFile != "" {
		return nil, fmt.Errorf("%s %q was not read: only an agents file read from disk (lovia worker --agents, lovia agents apply FILE) reads its instructions files, relative to its folder; give the text as instructions", s.at("instructions_file"), s.InstructionsFile)
	}
	switch {
	case s.Model == "":
		return nil, errors.New(`model is required (demo, scripted, openai:<model>, anthropic:<model> or a bare OpenAI-compatible model name)`)
	case s.Model == "scripted":
		if len(s.Script) == 0 {
			return nil, errors.New("model scripted needs a `script:` with one entry per model call")
		}
		steps, err := scriptSteps(s.Script)
		if err != nil {
			return nil, err
		}
		a.Provider = scripted.New(steps, scripted.ForAgent(s.Name))
	default:
		if len(s.Script) > 0 {
			return nil, fmt.Errorf("script is only for model scripted, not %q", s.Model)
		}
		if opts.Registry == nil {
			return nil, fmt.Errorf("model %q: no provider registry configured", s.Model)
		}
		p, err := opts.Registry.Resolve(s.Model)
		var ue *loop.UserError
		if errors.As(err, &ue) && strings.HasPrefix(ue.Message, "unknown model") {
			// The agents file also takes scripted, which no prefix names.
			return nil, &loop.UserError{Message: ue.Message, Hint: "use demo, scripted (with a script:), or " + ue.Hint}
		}
		if err != nil {
			return nil, err
		}
		a.Provider = p
	}
	if err := applyRunSettings(a, s); err != nil {
		return nil, err
	}
	if err := applyCompaction(a, s.Compaction, opts); err != nil {
		return nil, err
	}
	var err error
	if opts.Tools, err = withHTTPTools(opts.Tools, s); err != nil {
		return nil, err
	}
	sel, err := selectTools(s, visible, opts)
	if err != nil {
		return nil, err
	}
	var remote []*loop.Tool
	resolved := !opts.MCPUnresolved
	for _, r := range sel.remote {
		if r.source == nil {
			resolved = false
			continue
		}
		server, _, _ := strings.Cut(r.pattern, mcp.Separator)
		ts, _ := r.source.ServerTools(server)
		remote = append(remote, match(r.pattern, ts)...)
	}
	for _, n := range s.Approval {
		ok := false
		for _, t := range sel.builtin {
			if m, _ := path.Match(n, t.Name); m {
				ok = true
			}
		}
		for _, t := range asToolNames(s) {
			if m, _ := path.Match(n, t); m {
				ok = true
			}
		}
		if server, _, isRemote := strings.Cut(n, mcp.Separator); isRemote && !ok {
			ok = !resolved || len(match(n, remote)) > 0 || deferredServer(sel, server)
		}
		if !ok {
			return nil, fmt.Errorf("approval names %q, which is not among the agent's tools", n)
		}
	}
	for _, t := range sel.builtin {
		if matchesAny(s.Approval, t.Name) {
			g := *t
			g.NeedsApproval = true
			t = &g
		}
		a.Tools = append(a.Tools, t)
	}
	if resolved && len(sel.remote) > 0 {
		a.Plugins = append(a.Plugins, &remoteTools{sel: sel.remote, approval: s.Approval})
	}
	if err := buildPlugins(a, s.Plugins, opts); err != nil {
		return nil, err
	}
	if s.OutputSchema != nil {
		raw, err := json.Marshal(s.OutputSchema)
		if err != nil {
			return nil, fmt.Errorf("output_schema: %w", err)
		}
		a.Output = &loop.OutputSpec{Name: "output", Schema: raw}
	}
	if s.MaxTurns < 0 {
		return nil, fmt.Errorf("max_turns %d is negative", s.MaxTurns)
	}
	out := &Agent{Agent: a, Spec: s, MaxTurns: s.MaxTurns, ApprovalTimeout: time.Duration(s.ApprovalTimeout)}
	if out.ApprovalTimeout == 0 {
		out.ApprovalTimeout = DefaultApprovalTimeout
	}
	return out, nil
}

func scriptSteps(in []ScriptStep) ([]scripted.Step, error) {
	out := make([]scripted.Step, 0, len(in))
	for i, st := range in {
		step := scripted.Step{Text: st.Text, Reasoning: st.Reasoning, Finish: st.Finish, Delay: time.Duration(st.DelayMs) * time.Millisecond}
		n := 0
		if st.Call != nil {
			n++
			step.Calls = append(step.Calls, scripted.Call{ID: st.Call.ID, Name: st.Call.Name, Args: st.Call.Args})
		}
		if len(st.Calls) > 0 {
			n++
			for _, c := range st.Calls {
				step.Calls = append(step.Calls, scripted.Call{ID: c.ID, Name: c.Name, Args: c.Args})
			}
		}
		if st.RawCall != nil {
			n++
			step.Calls = append(step.Calls, scripted.Call{ID: st.RawCall.ID, Name: st.RawCall.Name, Raw: st.RawCall.Arguments, UseRaw: true})
		}
		if n > 1 {
			return nil, fmt.Errorf("script[%d]: use only one of call, calls and raw_call", i)
		}
		for _, c := range step.Calls {
			if c.Name == "" {
				return nil, fmt.Errorf("script[%d]: a call needs a name", i)
			}
		}
		if st.DelayMs < 0 {
			return nil, fmt.Errorf("script[%d]: delay_ms is negative", i)
		}
		out = append(out, step)
	}
	return out, nil
}
