package loop

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/lovia-fleet/lovia/pkg/loop/jsonschema"
)

// ToolFunc executes a tool call with the model's raw JSON arguments.
type ToolFunc func(ctx context.Context, rc *RunContext, args json.RawMessage) (any, error)

// ToolPolicy is middleware around one attempt of a tool call: it may
// short-circuit, cache, redact or observe. Policies wrap the function in
// order, the first outermost, inside retries and the per-attempt timeout.
type ToolPolicy func(name string, next ToolFunc) ToolFunc

// ApprovalPredicate decides whether a call needs approval from its parsed
// arguments. An error denies the call.
type ApprovalPredicate func(ctx context.Context, rc *RunContext, args map[string]any) (bool, error)

// Renderer turns a tool's successful return value into the text the model
// sees.
type Renderer func(v any) (string, error)

// Tool is a function the model can call. Build one with NewTool, or fill
// the fields for a hand-written schema. A Tool is configuration: it must not
// be modified after a run started using it.
type Tool struct {
	// Name is the name the model calls (unique per agent).
	Name string
	// Description tells the model what the tool does.
	Description string
	// Parameters is the JSON Schema of the arguments object.
	Parameters json.RawMessage
	// Strict asks providers for strict schema adherence.
	Strict bool
	// Func runs the call.
	Func ToolFunc
	// Sequential makes the tool an execution barrier: it waits for every
	// call in flight, runs alone, and later calls start after it.
	Sequential bool
	// NeedsApproval gates every call; Approval gates calls it returns true
	// for. Either way the call waits for a decision.
	NeedsApproval bool
	Approval      ApprovalPredicate
	// Retries after the first failed attempt (nil: the agent's default).
	Retries *int
	// Timeout per attempt (0: the agent's default; none if that is 0 too).
	Timeout time.Duration
	// MaxOutputChars caps the stored output (0: the agent's cap; <0: no cap).
	MaxOutputChars int
	// Render overrides the agent's renderer for successful results.
	Render Renderer
	// Policies wrap each attempt.
	Policies []ToolPolicy
	// ReturnsImages marks tools whose results carry image parts.
	ReturnsImages bool

	handoff *Handoff
	// sub is the sub-run's own limits of an agent-as-tool (SubRunLimits).
	sub *subRunLimits
}

type subRunLimits struct {
	maxTurns int
	budget   *Budget
}

// SubRunLimits gives an agent-as-tool's sub-run ([Agent.AsTool]) its own
// max_turns (0: the runner's default) and budget (nil: a copy of the
// parent's remaining budget), as lovia's as_tool(max_turns=, budget=)
// does. Exceeding them is the sub-run's failure — an error result the
// parent's model sees — never the parent's.
func SubRunLimits(maxTurns int, budget *Budget) ToolOption {
	return func(t *Tool) { t.sub = &subRunLimits{maxTurns: maxTurns, budget: budget} }
}

// Schema returns the tool's model-facing schema.
func (t *Tool) Schema() ToolSchema {
	params := t.Parameters
	if len(params) == 0 {
		params = emptyObjectSchema
	}
	return ToolSchema{Name: t.Name, Description: t.Description, Parameters: params, Strict: t.Strict}
}

var emptyObjectSchema = json.RawMessage(`{"type":"object","properties":{}}`)

// ToolOption configures a tool built by NewTool.
type ToolOption func(*Tool)

// Sequential makes the tool an execution barrier.
func Sequential() ToolOption { return func(t *Tool) { t.Sequential = true } }

// RequireApproval gates every call on a decision.
func RequireApproval() ToolOption { return func(t *Tool) { t.NeedsApproval = true } }

// ApprovalWhen gates the calls p returns true for.
func ApprovalWhen(p ApprovalPredicate) ToolOption { return func(t *Tool) { t.Approval = p } }

// WithRetries sets the retries after a failed attempt.
func WithRetries(n int) ToolOption { return func(t *Tool) { t.Retries = &n } }

// WithTimeout sets the per-attempt timeout.
func WithTimeout(d time.Duration) ToolOption { return func(t *Tool) { t.Timeout = d } }

// WithMaxOutputChars caps the stored output (<0: no cap).
func WithMaxOutputChars(n int) ToolOption { return func(t *Tool) { t.MaxOutputChars = n } }

// WithRenderer sets the tool's result renderer.
func WithRenderer(r Renderer) ToolOption { return func(t *Tool) { t.Render = r } }

// WithPolicies appends tool policies.
func WithPolicies(p ...ToolPolicy) ToolOption {
	return func(t *Tool) { t.Policies = append(t.Policies, p...) }
}

// Strict asks providers for strict schema adherence (every property
// required, no additional properties).
func Strict() ToolOption { return func(t *Tool) { t.Strict = true } }

// NewTool builds a tool from a Go function. The JSON Schema of the arguments
// is derived from In (a struct: `json` names, `desc` descriptions,
// `jsonschema` constraints; see package jsonschema). Model arguments are
// validated against it before fn runs: invalid arguments become an error
// result the model sees (InvalidToolArguments), never a call. NewTool panics
// when In cannot be described by a schema — a wiring-time mistake.
func NewTool[In, Out any](name, description string, fn func(ctx context.Context, rc *RunContext, in In) (Out, error), opts ...ToolOption) *Tool {
	schema, err := jsonschema.For[In]()
	if err != nil {
		panic(fmt.Sprintf("loop.NewTool(%q): %v", name, err))
	}
	t := &Tool{Name: name, Description: description}
	for _, o := range opts {
		o(t)
	}
	if t.Strict {
		schema = schema.Strict()
	}
	t.Parameters = schema.JSON()
	isStruct := reflect.TypeFor[In]().Kind() == reflect.Struct
	t.Func = func(ctx context.Context, rc *RunContext, args json.RawMessage) (any, error) {
		var raw any
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		if err := json.Unmarshal(args, &raw); err != nil {
			return nil, &InvalidToolArguments{Tool: name, Message: fmt.Sprintf("Invalid arguments for tool '%s': %v", name, err)}
		}
		if err := schema.Validate(raw); err != nil {
			return nil, &InvalidToolArguments{Tool: name, Message: fmt.Sprintf("Invalid arguments for tool '%s': %v", name, err)}
		}
		var in In
		if isStruct || len(args) > 0 {
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, &InvalidToolArguments{Tool: name, Message: fmt.Sprintf("Invalid arguments for tool '%s': %v", name, err)}
			}
		}
		return fn(ctx, rc, in)
	}
	return t
}

type toolCallKey struct{}

func withToolCall(ctx context.Context, tc ToolCall) context.Context {
	return context.WithValue(ctx, toolCallKey{}, tc)
}

// ToolCallFrom returns the call a tool function is executing, from the
// context the loop passes it: a tool that calls another system can name
// the call (its id is stable across a crash and a resume: a re-run of a
// dangling call has the same id), so that system can recognise a repeat.
func ToolCallFrom(ctx context.Context) (ToolCall, bool) {
	tc, ok := ctx.Value(toolCallKey{}).(ToolCall)
	return tc, ok
}

type approvalKey struct{}

func withApproval(ctx context.Context, reason string) context.Context {
	if reason == "" {
		return ctx
	}
	return context.WithValue(ctx, approvalKey{}, reason)
}

// ApprovalFrom returns the reason given with the approval of the gated
// call a tool function is executing ("" and false when none was given):
// a tool whose decision is its input — ask_human's answer — reads it here.
func ApprovalFrom(ctx context.Context) (string, bool) {
	r, ok := ctx.Value(approvalKey{}).(string)
	return r, ok
}
