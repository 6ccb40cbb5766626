package loop

import (
	"context"
	"time"
)

// Agent is immutable configuration: one instance serves any number of
// concurrent runs and holds no conversation state. Build it as a struct
// literal; derive variants with Clone. Fields are read, never written, by
// the runner.
type Agent struct {
	// Name identifies the agent (handoff targets, checkpoints, events).
	Name string
	// Instructions is the static system prompt.
	Instructions string
	// InstructionsFunc, when set, renders the instructions from the run's
	// context instead (at run start and at each handoff, not per turn).
	InstructionsFunc func(ctx context.Context, rc *RunContext) (string, error)
	// Fragments are dynamic instruction parts appended in order.
	Fragments []func(ctx context.Context, rc *RunContext) string
	// Provider is the model endpoint. When nil, Model is resolved through
	// the runner's registry and the provider is owned (and closed) by the run.
	Provider Provider
	// Model is a model string ("openai:gpt-4.1-mini", "anthropic:…", a bare
	// name for an OpenAI-compatible endpoint).
	Model string
	// Settings are sampling and request knobs.
	Settings ModelSettings
	// Tools the model may call.
	Tools []*Tool
	// Handoffs add one transfer_to_<name> tool each.
	Handoffs []Handoff
	// Plugins contribute tools, instructions, hooks, guardrails and view
	// injectors.
	Plugins []Plugin
	// InputGuardrails run once, before the first model call of a fresh run.
	InputGuardrails []InputGuardrail
	// OutputGuardrails run on the final parsed output.
	OutputGuardrails []OutputGuardrail
	// Hooks observe every event before the stream consumer does.
	Hooks *Hooks
	// Output asks for structured output (nil: plain text).
	Output *OutputSpec
	// OutputRepair decides repair turns after an invalid output. Nil means
	// one repair turn (DefaultRepair); NoRepair fails at once.
	OutputRepair RepairPolicy
	// Retry is the provider retry policy (nil: DefaultRetryPolicy).
	Retry *RetryPolicy
	// ContextPolicy derives the view sent to the model (nil: the whole
	// transcript).
	ContextPolicy ContextPolicy
	// ApprovalHandler decides calls nobody decided in band.
	ApprovalHandler ApprovalHandler
	// DefaultToolRetries and DefaultToolTimeout apply to tools that set none.
	DefaultToolRetries int
	DefaultToolTimeout time.Duration
	// MaxToolOutputChars caps stored tool output (0: 200,000; <0: no cap).
	MaxToolOutputChars int
	// Render is the default renderer of successful tool results.
	Render Renderer
}

// Clone returns a copy of a with its slices copied, after applying each
// override to the copy.
func (a *Agent) Clone(overrides ...func(*Agent)) *Agent {
	c := *a
	c.Fragments = append([]func(context.Context, *RunContext) string(nil), a.Fragments...)
	c.Tools = append([]*Tool(nil), a.Tools...)
	c.Handoffs = append([]Handoff(nil), a.Handoffs...)
	c.Plugins = append([]Plugin(nil), a.Plugins...)
	c.InputGuardrails = append([]InputGuardrail(nil), a.InputGuardrails...)
	c.OutputGuardrails = append([]OutputGuardrail(nil), a.OutputGuardrails...)
	for _, o := range overrides {
		o(&c)
	}
	return &c
}

// Handoff lets the model transfer control to another agent with a
// transfer_to_<name> tool call.
type Handoff struct {
	Agent *Agent
	// ToolName overrides "transfer_to_<slug of agent name>".
	ToolName string
	// Description overrides the default tool description.
	Description string
	// OnHandoff runs when this handoff wins (the first of its turn).
	OnHandoff func(ctx context.Context, rc *RunContext, reason string) error
}

// HandoffTo is a Handoff to a with default naming.
func HandoffTo(a *Agent) Handoff { return Handoff{Agent: a} }

// InputGuardrail checks the whole transcript of a fresh run before its
// first model call. A non-empty violation or an error trips it.
type InputGuardrail func(ctx context.Context, rc *RunContext, entries []Entry) (violation string, err error)

// OutputGuardrail checks the final parsed output.
type OutputGuardrail func(ctx context.Context, rc *RunContext, output any) (violation string, err error)

// ApprovalVerdict is an approval handler's answer.
type ApprovalVerdict string

// Approval verdicts. Ask leaves the call undecided, which denies it.
const (
	Allow ApprovalVerdict = "allow"
	Deny  ApprovalVerdict = "deny"
	Ask   ApprovalVerdict = "ask"
)

// ApprovalHandler decides a gated call nobody decided in band. It may block
// (waiting for a human) until ctx ends. An error denies the call and emits
// ToolCallFailed.
type ApprovalHandler func(ctx context.Context, rc *RunContext, call ToolCall) (ApprovalVerdict, string, error)

// Plugin bundles capabilities for an agent. Name identifies it (unique per
// agent). A plugin implements any of the optional interfaces below.
type Plugin interface {
	Name() string
}

// PluginSetup is set up once per run and per agent reached.
type PluginSetup interface {
	Setup(ctx context.Context, rc *RunContext) error
}

// PluginCloser is closed at run end, in reverse setup order.
type PluginCloser interface {
	Close(ctx context.Context) error
}

// PluginTools contributes tools.
type PluginTools interface {
	Tools() []*Tool
}

// PluginInstructions contributes system prompt text. Instructions is
// called when the run starts or resumes and at each handoff to the agent,
// with the run's context and RunContext, so it may read a store (bound
// the read; on failure return a line saying so: the run goes on). An
// empty string contributes nothing.
type PluginInstructions interface {
	Instructions(ctx context.Context, rc *RunContext) string
}

// PluginViewInjector appends transient entries to the tail of each model
// call's view; they are never persisted.
type PluginViewInjector interface {
	InjectView(ctx context.Context, rc *RunContext) []Entry
}

// PluginHooks contributes hooks (run after the agent's own).
type PluginHooks interface {
	Hooks() *Hooks
}

// PluginGuardrails contributes guardrails (run after the agent's own).
type PluginGuardrails interface {
	InputGuardrails() []InputGuardrail
	OutputGuardrails() []OutputGuardrail
}
