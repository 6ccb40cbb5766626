package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Call is one scripted tool call.
type Call struct {
	// ID is the call id (default "call_<name>" for a single call,
	// "call_<index>_<name>" in a batch).
	ID   string
	Name string
	// Args are JSON-encoded as the arguments; nil (or a nil map)
	// sends {}.
	Args any
	// Raw, when set, is the literal argument text (may be invalid JSON).
	Raw    string
	UseRaw bool
}

// Step is one scripted model turn.
type Step struct {
	Text      string
	Reasoning string
	Calls     []Call
	// Finish is the finish reason to report ("" reports none).
	Finish string
	// Usage overrides the default usage {input: 1, output: 1}.
	Usage *loop.Usage
	// Delay pauses between streamed words.
	Delay time.Duration
	// FailTimes makes the first n attempts at this step fail with Err
	// (default: a retryable ProviderError) after streaming Partial.
	FailTimes int
	Err       error
	Partial   string
	// Func replaces the step entirely: a custom stream.
	Func func(ctx context.Context, req *loop.ModelRequest, emit func(loop.Delta) error) error
}

// Text is a step that answers s.
func Text(s string) Step { return Step{Text: s} }

// TextWithReasoning is a step that reasons r, then answers s.
func TextWithReasoning(s, r string) Step { return Step{Text: s, Reasoning: r} }

// CallTool is a step with one tool call; args are JSON-encoded.
func CallTool(name string, args any, id string) Step {
	return Step{Calls: []Call{{ID: id, Name: name, Args: args}}}
}

// Batch is a step with several tool calls.
func Batch(calls ...Call) Step { return Step{Calls: calls} }

// RawCall is a step with one call whose argument text is literal.
func RawCall(name, raw, id, finish string) Step {
	return Step{Calls: []Call{{ID: id, Name: name, Raw: raw, UseRaw: true}}, Finish: finish}
}

// Option configures a Provider.
type Option func(*Provider)

// Sequential makes each successful call consume the next step.
func Sequential() Option { return func(p *Provider) { p.sequential = true } }

// NativeJSONSchema makes the provider claim native structured output.
func NativeJSONSchema() Option { return func(p *Provider) { p.native = true } }

// NoRecording stops the provider from keeping a copy of every request
// (benchmarks: recording costs O(transcript) per call).
func NoRecording() Option { return func(p *Provider) { p.noRecord = true } }

// ForAgent makes the provider play agent's own script, whatever other
// agents took part in the run: the step of a call is the number of model
// turns agent made in the transcript (AgentTurns), so an agent reached by
// a handoff starts at its first step and one handed back to continues at
// its next, and a resumed run, whose transcript is the same, continues at
// the same step.
func ForAgent(agent string) Option { return func(p *Provider) { p.agent = agent } }

// WithName sets the provider name (default "scripted").
func WithName(n string) Option { return func(p *Provider) { p.name = n } }

// Provider replays a script. It is safe for concurrent use.
type Provider struct {
	steps      []Step
	sequential bool
	native     bool
	name       string
	noRecord   bool
	agent      string

	mu       sync.Mutex
	next     int
	attempts map[int]int
	// requests are the last maxRecorded requests received, a ring whose
	// oldest is at reqStart once it is full.
	requests []loop.ModelRequest
	reqStart int
	calls    int
}

// maxRecorded bounds the requests a provider keeps: a scripted agent in a
// long-lived worker must not keep every request of every run it served.
const maxRecorded = 1024

// New returns a provider for steps.
func New(steps []Step, opts ...Option) *Provider {
	p := &Provider{steps: append([]Step(nil), steps...), name: "scripted", attempts: map[int]int{}}
	for _, o := range opts {
		o(p)
	}
	// Encode call arguments once.
	for i := range p.steps {
		calls := append([]Call(nil), p.steps[i].Calls...)
		for j := range calls {
			if calls[j].UseRaw {
				continue
			}
			raw := "{}"
			if calls[j].Args != nil {
				b, err := json.Marshal(calls[j].Args)
				if err != nil {
					panic(fmt.Sprintf("scripted: step %d call %s: args: %v", i, calls[j].Name, err))
				}
				// A typed nil (a nil map from a script without args)
				// encodes as null; a model sends an empty object.
				if s := string(b); s != "null" {
					raw = s
				}
			}
			calls[j].Raw, calls[j].UseRaw = raw, true
		}
		p.steps[i].Calls = calls
	}
	return p
}

// Info implements loop.Provider.
func (p *Provider) Info() loop.ProviderInfo {
	return loop.ProviderInfo{Name: p.name, Model: "scripted", Endpoint: "scripted", NativeJSONSchema: p.native}
}

// Calls returns the number of model calls made (attempts included).
func (p *Provider) Calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

// Requests returns a copy of the requests received, in order: every one
// of them, or the last 1,024 once more came.
func (p *Provider) Requests() []loop.ModelRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]loop.ModelRequest, 0, len(p.requests))
	out = append(out, p.requests[p.reqStart:]...)
	return append(out, p.requests[:p.reqStart]...)
}

// record keeps a copy of req (p.mu held).
func (p *Provider) record(req *loop.ModelRequest) {
	r := loop.ModelRequest{
		Entries: append([]loop.Entry(nil), req.Entries...), Tools: req.Tools,
		ResponseFormat: req.ResponseFormat, Settings: req.Settings,
	}
	if len(p.requests) < maxRecorded {
		p.requests = append(p.requests, r)
		return
	}
	p.requests[p.reqStart] = r
	p.reqStart = (p.reqStart + 1) % maxRecorded
}

// ModelTurns counts the model turns in entries: runs of consecutive
// assistant entries (reasoning, text, tool calls).
func ModelTurns(entries []loop.Entry) int {
	n, in := 0, false
	for i := range entries {
		switch entries[i].Kind {
		case loop.KindAssistantText, loop.KindReasoning, loop.KindToolCall:
			if !in {
				n++
				in = true
			}
		default:
			in = false
		}
	}
	return n
}

// AgentTurns counts the model turns agent made in entries, for a call
// made to agent now (its tools are tools). A successful handoff's result
// (loop.HandoffOutputPrefix + name) makes the turns after it that
// agent's. The turns before the first handoff are the run's first
// agent's, which the transcript does not name: they count as agent's when
// agent has every tool called in them. When the last handoff was to
// another agent, agent runs now because a new run of the session began
// with it: the turns after the last user input are agent's.
func AgentTurns(entries []loop.Entry, agent string, tools []loop.ToolSchema) int {
	type turn struct {
		owner string // "" before the first handoff
		at    int
	}
	var (
		turns      []turn
		owner      string
		handedOff  bool
		lastHand   = -1
		firstCalls []string
		in         bool
	)
	for i := range entries {
		e := &entries[i]
		switch e.Kind {
		case loop.KindAssistantText, loop.KindReasoning, loop.KindToolCall:
			if !in {
				turns = append(turns, turn{owner: owner, at: i})
				in = true
			}
			if e.Kind == loop.KindToolCall && !handedOff {
				firstCalls = append(firstCalls, e.Name)
			}
			continue
		case loop.KindToolResult:
			if rest, ok := strings.CutPrefix(e.Output, loop.HandoffOutputPrefix); ok && !e.IsError {
				name, _, _ := strings.Cut(rest, " ")
				owner, handedOff, lastHand = name, true, i
			}
		}
		in = false
	}
	firstMine := true
	if handedOff {
		have := make(map[string]bool, len(tools))
		for _, t := range tools {
			have[t.Name] = true
		}
		for _, c := range firstCalls {
			if !have[c] {
				firstMine = false
			}
		}
	}
	newRun := len(entries)
	if handedOff && owner != agent {
		for i := len(entries) - 1; i > lastHand; i-- {
			if entries[i].Kind == loop.KindInput && entries[i].Role == loop.RoleUser {
				newRun = i
				break
			}
		}
	}
	n := 0
	for _, t := range turns {
		if t.at > newRun || t.owner == agent || (t.owner == "" && firstMine) {
			n++
		}
	}
	return n
}

// ErrExhausted is returned when the script has no step for a call.
var ErrExhausted = errors.New("scripted: script exhausted")

// Stream implements loop.Provider.
func (p *Provider) Stream(ctx context.Context, req *loop.ModelRequest, emit func(loop.Delta) error) error {
	p.mu.Lock()
	p.calls++
	if !p.noRecord {
		p.record(req)
	}
	idx := p.next
	switch {
	case p.sequential:
	case p.agent != "":
		idx = AgentTurns(req.Entries, p.agent, req.Tools)
	default:
		idx = ModelTurns(req.Entries)
	}
	if idx >= len(p.steps) {
		p.mu.Unlock()
		return &loop.ProviderError{
			Message: fmt.Sprintf("scripted model: no step %d in a script of %d", idx+1, len(p.steps)), Vendor: "scripted",
			Retryable: loop.NotRetryable, Cause: ErrExhausted,
			Hint: "add steps to the script (one per model turn)",
		}
	}
	st := p.steps[idx]
	p.attempts[idx]++
	attempt := p.attempts[idx]
	p.mu.Unlock()

	if st.Func != nil {
		err := st.Func(ctx, req, emit)
		if err == nil {
			p.advance(idx)
		}
		return err
	}
	if attempt <= st.FailTimes {
		if st.Partial != "" {
			if err := emit(loop.Delta{Kind: loop.DeltaText, Text: st.Partial}); err != nil {
				return err
			}
		}
		if st.Err != nil {
			return st.Err
		}
		return &loop.ProviderError{Message: "scripted transient failure", Vendor: "scripted", Retryable: loop.Retryable}
	}
	if err := p.play(ctx, st, emit); err != nil {
		return err
	}
	p.advance(idx)
	return nil
}

func (p *Provider) advance(idx int) {
	if p.sequential {
		p.mu.Lock()
		if p.next == idx {
			p.next++
		}
		p.mu.Unlock()
	}
}

func (p *Provider) play(ctx context.Context, st Step, emit func(loop.Delta) error) error {
	if st.Reasoning != "" {
		if err := streamWords(ctx, st.Reasoning, loop.DeltaReasoning, st.Delay, emit); err != nil {
			return err
		}
		e := loop.Entry{Kind: loop.KindReasoning, Text: st.Reasoning, Provider: p.name}
		if err := emit(loop.Delta{Kind: loop.DeltaEntry, Entry: &e}); err != nil {
			return err
		}
	}
	if st.Text != "" {
		if err := streamWords(ctx, st.Text, loop.DeltaText, st.Delay, emit); err != nil {
			return err
		}
	}
	for i, c := range st.Calls {
		id := c.ID
		if id == "" {
			if len(st.Calls) == 1 {
				id = "call_" + c.Name
			} else {
				id = fmt.Sprintf("call_%d_%s", i, c.Name)
			}
		}
		if err := emit(loop.Delta{Kind: loop.DeltaToolCall, Index: i, CallID: id, Name: c.Name, Arguments: c.Raw}); err != nil {
			return err
		}
	}
	u := loop.Usage{InputTokens: 1, OutputTokens: 1, TotalTokens: 2}
	if st.Usage != nil {
		u = *st.Usage
	}
	if err := emit(loop.Delta{Kind: loop.DeltaUsage, Usage: u}); err != nil {
		return err
	}
	if st.Finish != "" {
		return emit(loop.Delta{Kind: loop.DeltaFinish, Finish: st.Finish})
	}
	return nil
}

// streamWords emits s in word-sized fragments (each keeps its trailing
// space), so the concatenation is exactly s.
func streamWords(ctx context.Context, s string, kind loop.DeltaKind, delay time.Duration, emit func(loop.Delta) error) error {
	for len(s) > 0 {
		i := strings.IndexByte(s, ' ')
		var w string
		if i < 0 {
			w, s = s, ""
		} else {
			w, s = s[:i+1], s[i+1:]
		}
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
		if err := emit(loop.Delta{Kind: kind, Text: w}); err != nil {
			return err
		}
	}
	return nil
}
