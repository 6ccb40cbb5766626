package loop

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
)

// activation is an agent made ready for a run: provider, merged tools,
// plugins set up. It is memoized per agent for the whole run.
type activation struct {
	agent     *Agent
	provider  Provider
	info      ProviderInfo
	tools     []*Tool
	byName    map[string]*Tool
	schemas   []ToolSchema
	hooks     []*Hooks
	injectors []PluginViewInjector
	inGuards  []InputGuardrail
	outGuards []OutputGuardrail
	pluginIns []PluginInstructions
	output    *OutputSpec
	native    bool
}

func (a *activation) dispatch(ctx context.Context, rc *RunContext, ev Event, log *slog.Logger) {
	for _, h := range a.hooks {
		h.dispatch(ctx, rc, ev, log)
	}
}

func (ru *run) outputSpecFor(a *Agent) *OutputSpec {
	if ru.opts.outputSet {
		return ru.opts.output
	}
	return a.Output
}

// activate readies agent a (once per run).
func (ru *run) activate(a *Agent) (*activation, error) {
	if act := ru.acts[a]; act != nil {
		return act, nil
	}
	act := &activation{agent: a}
	// Provider.
	switch {
	case a.Provider != nil:
		act.provider = a.Provider
	case a.Model != "":
		if ru.r.registry == nil {
			return nil, &UserError{
				Message: fmt.Sprintf("agent %q names model %q but the runner has no provider registry", a.Name, a.Model),
				Hint:    "build the runner with RunnerConfig.Registry (see pkg/provider), or set Agent.Provider",
			}
		}
		p, err := ru.r.registry.Resolve(a.Model)
		if err != nil {
			return nil, err
		}
		act.provider = p
		if c, ok := p.(interface{ Close() error }); ok {
			ru.closers = append(ru.closers, func(context.Context) error { return c.Close() })
		}
	default:
		return nil, &UserError{
			Message: fmt.Sprintf("agent %q has no model", a.Name),
			Hint:    `set Agent.Model to "vendor:model" (e.g. "openai:gpt-4.1-mini") or Agent.Provider to a provider instance`,
		}
	}
	act.info = act.provider.Info()
	act.output = ru.outputSpecFor(a)
	act.native = act.output != nil && act.info.NativeJSONSchema
	// Plugins: names unique before any setup.
	names := map[string]bool{}
	for _, p := range a.Plugins {
		if names[p.Name()] {
			return nil, &UserError{
				Message: fmt.Sprintf("agent %q has two plugins named %q", a.Name, p.Name()),
				Hint:    "a plugin name is its identity: rename one or remove the duplicate",
			}
		}
		names[p.Name()] = true
	}
	if a.Hooks != nil {
		act.hooks = append(act.hooks, a.Hooks)
	}
	act.inGuards = append(act.inGuards, a.InputGuardrails...)
	act.outGuards = append(act.outGuards, a.OutputGuardrails...)
	var pluginTools []*Tool
	for _, p := range a.Plugins {
		if s, ok := p.(PluginSetup); ok {
			if err := s.Setup(ru.ctx, ru.rc); err != nil {
				return nil, fmt.Errorf("plugin %q setup: %w", p.Name(), err)
			}
		}
		if c, ok := p.(PluginCloser); ok {
			ru.closers = append(ru.closers, c.Close)
		}
		if t, ok := p.(PluginTools); ok {
			for _, tool := range t.Tools() {
				if tool.ReturnsImages && !act.info.Vision {
					continue
				}
				pluginTools = append(pluginTools, tool)
			}
		}
		if in, ok := p.(PluginInstructions); ok {
			act.pluginIns = append(act.pluginIns, in)
		}
		if inj, ok := p.(PluginViewInjector); ok {
			act.injectors = append(act.injectors, inj)
		}
		if h, ok := p.(PluginHooks); ok && h.Hooks() != nil {
			act.hooks = append(act.hooks, h.Hooks())
		}
		if g, ok := p.(PluginGuardrails); ok {
			act.inGuards = append(act.inGuards, g.InputGuardrails()...)
			act.outGuards = append(act.outGuards, g.OutputGuardrails()...)
		}
	}
	// Tools: agent, plugins, handoffs, then policy tools (shadowed on clash).
	// Without plugins the merged set depends only on the agent and the
	// policy, both immutable configuration: it is built once per runner.
	var (
		ts  *toolset
		err error
	)
	if len(a.Plugins) == 0 {
		ts, err = ru.r.toolsetFor(a, ru.policy)
	} else {
		ts, err = buildToolset(a, pluginTools, ru.policy)
	}
	if err != nil {
		return nil, err
	}
	act.tools, act.byName, act.schemas = ts.tools, ts.byName, ts.schemas
	if ru.acts == nil {
		ru.acts = make(map[*Agent]*activation)
	}
	ru.acts[a] = act
	return act, nil
}

// renderHead renders the runner's system head for the active agent.
func (ru *run) renderHead(act *activation) ([]Entry, error) {
	a := act.agent
	var parts []string
	ins := a.Instructions
	if a.InstructionsFunc != nil {
		s, err := a.InstructionsFunc(ru.ctx, ru.rc)
		if err != nil {
			return nil, fmt.Errorf("agent %q instructions: %w", a.Name, err)
		}
		ins = s
	}
	if ins != "" {
		parts = append(parts, ins)
	}
	for _, f := range a.Fragments {
		if s := f(ru.ctx, ru.rc); s != "" {
			parts = append(parts, s)
		}
	}
	if ru.opts.extraInstructions != "" {
		parts = append(parts, ru.opts.extraInstructions)
	}
	for _, in := range act.pluginIns {
		if s := in.Instructions(ru.ctx, ru.rc); s != "" {
			parts = append(parts, s)
		}
	}
	if act.output != nil && !act.native {
		parts = append(parts, act.output.promptBlock())
	}
	if len(parts) == 0 {
		return nil, nil
	}
	return []Entry{SystemText(strings.Join(parts, "\n\n"))}, nil
}

// handoffSignal is what a handoff tool returns.
type handoffSignal struct {
	handoff *Handoff
	reason  string
}

// HandoffOutputPrefix starts the result of a handoff that happened:
// "Transferred to <agent name>", then " (<reason>)" when the model gave
// one. From the next model turn on, that agent runs.
const HandoffOutputPrefix = "Transferred to "

// HandoffToolName returns "transfer_to_<slug>" for an agent name.
func HandoffToolName(agentName string) string { return "transfer_to_" + slug(agentName) }

func slug(name string) string {
	var b strings.Builder
	lastUnderscore := false
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
			lastUnderscore = false
		default:
			if !lastUnderscore && b.Len() > 0 {
				b.WriteByte('_')
				lastUnderscore = true
			}
		}
	}
	s := strings.TrimRight(b.String(), "_")
	if s == "" {
		sum := sha1.Sum([]byte(name))
		return "agent_" + hex.EncodeToString(sum[:4])
	}
	if len(s) > 52 {
		sum := sha1.Sum([]byte(name))
		s = s[:43] + "_" + hex.EncodeToString(sum[:4])
	}
	return s
}

var handoffSchema = json.RawMessage(`{"type":"object","properties":{"reason":{"type":"string","description":"Why control is transferred."}}}`)

func handoffTool(h *Handoff) *Tool {
	name := h.ToolName
	if name == "" {
		name = HandoffToolName(h.Agent.Name)
	}
	desc := h.Description
	if desc == "" {
		desc = fmt.Sprintf("Transfer the conversation to the %s agent.", h.Agent.Name)
	}
	return &Tool{
		Name: name, Description: desc, Parameters: handoffSchema, Sequential: true, handoff: h,
		Func: func(_ context.Context, _ *RunContext, args json.RawMessage) (any, error) {
			var in struct {
				Reason string `json:"reason"`
			}
			_ = json.Unmarshal(args, &in)
			return &handoffSignal{handoff: h, reason: in.Reason}, nil
		},
	}
}

// applyHandoff swaps the active agent after TurnEnded.
func (ru *run) applyHandoff() error {
	sig := ru.pendingHandoff
	ru.pendingHandoff = nil
	target := sig.handoff.Agent
	span := ru.startSpan("handoff", Attr{"from", ru.agent.Name}, Attr{"to", target.Name})
	act, err := ru.activate(target)
	if err != nil {
		span.End(err)
		return err
	}
	prev, prevAct := ru.agent, ru.act
	ru.agent, ru.act = target, act
	ru.rc.setAgent(target)
	head, err := ru.renderHead(act)
	if err != nil {
		span.End(err)
		return err
	}
	ru.rc.mu.Lock()
	old := ru.rc.entries
	next := make([]Entry, 0, len(old)-ru.headLen+len(head))
	next = append(next, head...)
	next = append(next, old[ru.headLen:]...)
	ru.rc.entries = next
	ru.rc.mu.Unlock()
	ru.runStart += len(head) - ru.headLen
	ru.headLen = len(head)
	ev := &HandoffOccurred{FromAgent: prev.Name, ToAgent: target.Name}
	if prevAct != nil && prev != target {
		ev.EventHeader = EventHeader{Agent: target.Name, Turn: ru.turns}
		prevAct.dispatch(ru.ctx, ru.rc, ev, ru.log)
	}
	span.End(nil)
	return ru.emit(ev)
}

func (ru *run) startSpan(name string, attrs ...Attr) Span {
	_, s := ru.tracer.Start(ru.ctx, name, attrs...)
	return s
}

// tracing reports whether spans are recorded (attributes cost allocations).
func (ru *run) tracing() bool {
	_, noop := ru.tracer.(NoopTracer)
	return !noop
}

func jsonRaw(v any) (json.RawMessage, error) {
	if s, ok := v.(string); ok {
		return json.RawMessage(s), nil
	}
	b, err := json.Marshal(v)
	return b, err
}

// toolset is an agent's merged tools.
type toolset struct {
	tools   []*Tool
	byName  map[string]*Tool
	schemas []ToolSchema
}

// maxToolsets bounds the runner's toolset cache.
const maxToolsets = 1024

type toolsetKey struct {
	agent  *Agent
	policy any
}

// toolsetFor returns the cached merged tools of a plugin-free agent.
func (r *Runner) toolsetFor(a *Agent, policy ContextPolicy) (*toolset, error) {
	var key toolsetKey
	cacheable := policy == nil || reflect.TypeOf(policy).Comparable()
	if cacheable {
		key = toolsetKey{agent: a, policy: policy}
		if v, ok := r.toolsets.Load(key); ok {
			return v.(*toolset), nil
		}
	}
	ts, err := buildToolset(a, nil, policy)
	if err != nil {
		return nil, err
	}
	if cacheable {
		// Bounded: agents built per request must not pile up.
		if r.toolsetN.Add(1) > maxToolsets {
			r.toolsets.Clear()
			r.toolsetN.Store(1)
		}
		r.toolsets.Store(key, ts)
	}
	return ts, nil
}

func buildToolset(a *Agent, pluginTools []*Tool, policy ContextPolicy) (*toolset, error) {
	ts := &toolset{byName: make(map[string]*Tool, len(a.Tools)+len(pluginTools)+len(a.Handoffs))}
	add := func(t *Tool, quiet bool) error {
		if prev := ts.byName[t.Name]; prev != nil {
			if quiet {
				return nil
			}
			return &UserError{
				Message: fmt.Sprintf("Tool name conflict: agent %q has two tools named %q", a.Name, t.Name),
				Hint:    "rename one tool or remove the duplicate; prefix plugin or MCP tools (e.g. fs__read_file)",
			}
		}
		ts.byName[t.Name] = t
		ts.tools = append(ts.tools, t)
		return nil
	}
	for _, t := range a.Tools {
		if err := add(t, false); err != nil {
			return nil, err
		}
	}
	for _, t := range pluginTools {
		if err := add(t, false); err != nil {
			return nil, err
		}
	}
	for i := range a.Handoffs {
		if err := add(handoffTool(&a.Handoffs[i]), false); err != nil {
			return nil, err
		}
	}
	if pt, ok := policy.(ContextPolicyTools); ok {
		for _, t := range pt.Tools() {
			_ = add(t, true)
		}
	}
	ts.schemas = make([]ToolSchema, len(ts.tools))
	for i, t := range ts.tools {
		ts.schemas[i] = t.Schema()
	}
	return ts, nil
}
