package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Name is the adapter name (ProviderInfo.Name).
const Name = "demo"

// Config configures the demo model. The zero value is ready.
type Config struct {
	// Model is the model name in ProviderInfo. Default "demo".
	Model string
	// WordDelay pauses between streamed words, so that a demo looks like a
	// model typing. Default 0 (no pause).
	WordDelay time.Duration
	// CalculatorTool and TimeTool name the tools the model calls. Defaults
	// "calculator" (argument {"expression": "12*7"}) and "time_now" ({}).
	CalculatorTool string
	TimeTool       string
}

// WithDefaults returns a copy of c with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.Model == "" {
		c.Model = Name
	}
	if c.CalculatorTool == "" {
		c.CalculatorTool = "calculator"
	}
	if c.TimeTool == "" {
		c.TimeTool = "time_now"
	}
	return c
}

func (c Config) validate() error {
	if c.WordDelay < 0 {
		return fmt.Errorf("demo: Config.WordDelay %s is negative", c.WordDelay)
	}
	return nil
}

// Provider is the offline demo model. It implements [loop.Provider] and
// [loop.TokenEstimator], makes no network call, is deterministic (the same
// view always yields the same deltas) and is safe for concurrent use.
type Provider struct {
	cfg Config
}

var (
	_ loop.Provider       = (*Provider)(nil)
	_ loop.TokenEstimator = (*Provider)(nil)
)

// New returns the demo model.
func New(cfg Config) (*Provider, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, &loop.UserError{Message: err.Error(), Hint: "fix the demo model's Config", Cause: err}
	}
	return &Provider{cfg: cfg}, nil
}

// Info names the model. The demo model has no native JSON-schema support
// and no vision.
func (p *Provider) Info() loop.ProviderInfo {
	return loop.ProviderInfo{Name: Name, Model: p.cfg.Model, Endpoint: "offline"}
}

// Stream answers the view. When it ends with tool results, the answer is
// built from them ("12*7 = 84."); otherwise the last user input decides:
// arithmetic calls the calculator tool, a time question calls the time
// tool (both when it asks both), anything else gets a helpful answer that
// says this is an offline demo model. Text streams word by word; the usage
// is an estimate (four characters a token) and the finish reason is "stop"
// or "tool_calls".
func (p *Provider) Stream(ctx context.Context, req *loop.ModelRequest, emit func(loop.Delta) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	in, _ := p.EstimateTokens(req.Entries, req.Tools)
	if results := trailingResults(req.Entries); len(results) > 0 {
		return p.say(ctx, emit, in, p.fromResults(req.Entries, results))
	}
	question := lastUserText(req.Entries)
	var calls []loop.Entry
	if expr, ok := arithmetic(question); ok {
		if has(req.Tools, p.cfg.CalculatorTool) {
			args, _ := json.Marshal(map[string]string{"expression": expr})
			calls = append(calls, loop.ToolCallEntry("", p.cfg.CalculatorTool, string(args)))
		} else if !asksTime(question) || !has(req.Tools, p.cfg.TimeTool) {
			return p.say(ctx, emit, in, computed(expr))
		}
	}
	if asksTime(question) && has(req.Tools, p.cfg.TimeTool) {
		calls = append(calls, loop.ToolCallEntry("", p.cfg.TimeTool, "{}"))
	}
	if len(calls) > 0 {
		return p.call(emit, in, req.Entries, calls)
	}
	return p.say(ctx, emit, in, p.reply(question, req.Tools))
}

// call emits tool calls with ids unique within the view.
func (p *Provider) call(emit func(loop.Delta) error, in int, view []loop.Entry, calls []loop.Entry) error {
	n := 0
	for i := range view {
		if view[i].Kind == loop.KindToolCall {
			n++
		}
	}
	out := 0
	for i, c := range calls {
		id := fmt.Sprintf("demo_call_%d", n+i+1)
		if err := emit(loop.Delta{Kind: loop.DeltaToolCall, Index: i, CallID: id, Name: c.Name, Arguments: c.Arguments}); err != nil {
			return err
		}
		out += tokens(c.Name) + tokens(c.Arguments)
	}
	return p.end(emit, in, out, "tool_calls")
}

// say streams text word by word: every delta but the first starts with the
// space that precedes its word.
func (p *Provider) say(ctx context.Context, emit func(loop.Delta) error, in int, text string) error {
	for i, w := range strings.Split(text, " ") {
		if i > 0 {
			w = " " + w
			if err := p.pause(ctx); err != nil {
				return err
			}
		}
		if err := emit(loop.Delta{Kind: loop.DeltaText, Text: w}); err != nil {
			return err
		}
	}
	return p.end(emit, in, tokens(text), "stop")
}

func (p *Provider) pause(ctx context.Context) error {
	if p.cfg.WordDelay <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(p.cfg.WordDelay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (p *Provider) end(emit func(loop.Delta) error, in, out int, finish string) error {
	u := loop.Usage{InputTokens: int64(in), OutputTokens: int64(out), TotalTokens: int64(in + out)}
	if err := emit(loop.Delta{Kind: loop.DeltaUsage, Usage: u}); err != nil {
		return err
	}
	return emit(loop.Delta{Kind: loop.DeltaFinish, Finish: finish})
}

// EstimateTokens estimates a view at four characters a token.
func (p *Provider) EstimateTokens(entries []loop.Entry, tools []loop.ToolSchema) (int, error) {
	n := 0
	for i := range entries {
		e := &entries[i]
		n += 4 + tokens(e.ContentText()) + tokens(e.Text) + tokens(e.Name) + tokens(e.Arguments) + tokens(e.Output)
	}
	for _, t := range tools {
		n += tokens(t.Name) + tokens(t.Description) + tokens(string(t.Parameters))
	}
	return n, nil
}

func tokens(s string) int { return (len(s) + 3) / 4 }

func has(tools []loop.ToolSchema, name string) bool {
	for _, t := range tools {
		if t.Name == name {
			return true
		}
	}
	return false
}
