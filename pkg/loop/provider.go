package loop

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Usage counts tokens. InputTokens is always the full prompt, including
// cached tokens; CacheReadTokens and CacheWriteTokens subdivide it.
type Usage struct {
	InputTokens      int64 `json:"input_tokens" msgpack:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens" msgpack:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens" msgpack:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens" msgpack:"cache_write_tokens"`
	TotalTokens      int64 `json:"total_tokens" msgpack:"total_tokens"`
}

// Add folds o into u and recomputes TotalTokens.
func (u *Usage) Add(o Usage) {
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.CacheReadTokens += o.CacheReadTokens
	u.CacheWriteTokens += o.CacheWriteTokens
	u.TotalTokens = u.InputTokens + u.OutputTokens
}

// IsZero reports whether nothing was counted.
func (u Usage) IsZero() bool {
	return u.InputTokens == 0 && u.OutputTokens == 0 && u.CacheReadTokens == 0 && u.CacheWriteTokens == 0
}

// DeltaKind names a provider stream delta.
type DeltaKind uint8

// Delta kinds.
const (
	// DeltaText is a fragment of assistant text (Text).
	DeltaText DeltaKind = iota + 1
	// DeltaReasoning is a fragment of reasoning text (Text).
	DeltaReasoning
	// DeltaToolCall is a fragment of a tool call: Index names the call slot;
	// CallID and Name are taken from the latest non-empty fragment and the
	// Arguments fragments are concatenated.
	DeltaToolCall
	// DeltaUsage reports the turn's usage (the last one wins).
	DeltaUsage
	// DeltaFinish reports the finish reason ("stop", "length", "tool_calls", …).
	DeltaFinish
	// DeltaEntry is a provider-authoritative finished entry (Entry). When a
	// provider sends any completed entry of a kind, only completed entries of
	// that kind are used for the turn; the kind's fragments are ignored.
	DeltaEntry
)

// Delta is one item of a provider's stream.
type Delta struct {
	Kind      DeltaKind
	Text      string
	Index     int
	CallID    string
	Name      string
	Arguments string
	Usage     Usage
	Finish    string
	Entry     *Entry
}

// ToolSchema is the model-facing description of a tool.
type ToolSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict,omitempty"`
}

// ResponseFormat asks a provider for native structured output.
type ResponseFormat struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict bool            `json:"strict"`
}

// ModelSettings are per-agent sampling and request knobs. Nil pointers and
// zero values mean "the provider's default".
type ModelSettings struct {
	Temperature       *float64
	TopP              *float64
	MaxTokens         int
	Stop              []string
	ParallelToolCalls *bool
	// ProviderOptions are passed to one adapter verbatim (keyed by adapter
	// name, e.g. "openai", "anthropic").
	ProviderOptions map[string]map[string]any
}

// ModelRequest is one model call: the view (not necessarily the whole
// transcript), the tools whose schemas ride along, and settings. A provider
// must not modify or retain Entries after Stream returns.
type ModelRequest struct {
	Entries        []Entry
	Tools          []ToolSchema
	ResponseFormat *ResponseFormat
	Settings       ModelSettings
}

// ProviderInfo identifies a provider and states what it supports.
type ProviderInfo struct {
	// Name is the adapter name ("openai", "anthropic", "scripted", …); it is
	// written on reasoning entries so only the writing adapter interprets
	// their replay data.
	Name string
	// Model is the model the provider calls.
	Model string
	// Endpoint is the base URL (or another stable endpoint key).
	Endpoint string
	// NativeJSONSchema is true when the provider enforces a JSON Schema on
	// its output (ModelRequest.ResponseFormat); else the loop puts the
	// schema in the system prompt.
	NativeJSONSchema bool
	// Vision is true when image parts reach the model.
	Vision bool
}

// Provider is a model endpoint. Stream sends the request and calls emit for
// every delta, in order, from the calling goroutine. If emit returns an error
// Stream stops and returns it. Stream returns nil only when the turn finished
// normally; a stream cut mid-way must return a retryable *ProviderError and
// a rejected prompt that is too long a *ContextOverflowError. Cancelling ctx
// aborts the call. Implementations are safe for concurrent use.
type Provider interface {
	Info() ProviderInfo
	Stream(ctx context.Context, req *ModelRequest, emit func(Delta) error) error
}

// ContextWindowDiscoverer is implemented by providers that can ask their
// endpoint for the model's context window (in tokens). It returns 0 when the
// endpoint does not publish one.
type ContextWindowDiscoverer interface {
	DiscoverContextWindow(ctx context.Context) (int, error)
}

// TokenEstimator is implemented by providers that can count the tokens of a
// view better than the loop's heuristic.
type TokenEstimator interface {
	EstimateTokens(entries []Entry, tools []ToolSchema) (int, error)
}

// ProviderFactory builds a provider for a model name (the part of a model
// string after "prefix:").
type ProviderFactory func(model string) (Provider, error)

// Registry maps model-string prefixes ("openai", "anthropic", …) to
// provider factories. A bare name (no prefix) uses the "" entry. A Registry
// is safe for concurrent use; the zero value is empty and ready.
type Registry struct {
	mu        sync.RWMutex
	factories map[string]ProviderFactory
}

// Register adds or replaces the factory for prefix ("" for bare names).
func (r *Registry) Register(prefix string, f ProviderFactory) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.factories == nil {
		r.factories = make(map[string]ProviderFactory)
	}
	r.factories[prefix] = f
}

// Prefixes returns the registered prefixes, sorted.
func (r *Registry) Prefixes() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.factories))
	for p := range r.factories {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Resolve builds the provider for a model string: "prefix:model" uses the
// prefix's factory; a bare name uses a factory registered under that exact
// name (such as "demo") with an empty model, else the "" factory (an
// OpenAI-compatible endpoint) with the name as the model.
func (r *Registry) Resolve(spec string) (Provider, error) {
	r.mu.RLock()
	var (
		f     ProviderFactory
		model string
	)
	if prefix, m, ok := strings.Cut(spec, ":"); ok {
		f, model = r.factories[prefix], m
	} else if f = r.factories[spec]; f == nil {
		f, model = r.factories[""], spec
	}
	r.mu.RUnlock()
	if f == nil || spec == "" {
		return nil, &UserError{Message: fmt.Sprintf("unknown model %q", spec), Hint: r.modelHint()}
	}
	p, err := f(model)
	if err != nil {
		return nil, fmt.Errorf("model %q: %w", spec, err)
	}
	return p, nil
}

// modelHint says which model strings resolve: "prefix:model" with the
// registered prefixes, and a bare name when "" is registered. (A program
// adds a prefix with [Registry.Register].)
func (r *Registry) modelHint() string {
	var prefixes []string
	bare := false
	for _, p := range r.Prefixes() {
		if p == "" {
			bare = true
			continue
		}
		prefixes = append(prefixes, p)
	}
	hint := "write the model as prefix:model, with a known prefix: " + strings.Join(prefixes, ", ")
	if bare {
		hint += "; or a bare model name for the OpenAI-compatible endpoint (OPENAI_BASE_URL)"
	}
	return hint
}
