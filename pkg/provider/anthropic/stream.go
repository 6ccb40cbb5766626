package anthropic

import (
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// block is the state of one open content block.
type block struct {
	kind      string // "text", "thinking", "redacted_thinking", "tool_use", …
	thinking  strings.Builder
	signature string
	redacted  string
	input     string // tool_use input given at block start
	partial   bool   // tool_use input arrived as input_json_delta
}

// turn turns the events of one message stream into deltas.
type turn struct {
	p       *Provider
	emit    func(loop.Delta) error
	blocks  map[int64]*block
	usage   loop.Usage
	hasUse  bool
	finish  string
	started bool // an event arrived
	stopped bool // message_stop arrived
}

func newTurn(p *Provider, emit func(loop.Delta) error) *turn {
	return &turn{p: p, emit: emit, blocks: map[int64]*block{}}
}

func (t *turn) event(ev sdk.MessageStreamEventUnion) error {
	t.started = true
	switch ev.Type {
	case "message_start":
		u := ev.Message.Usage
		t.usage = loop.Usage{
			InputTokens:      u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens,
			OutputTokens:     u.OutputTokens,
			CacheReadTokens:  u.CacheReadInputTokens,
			CacheWriteTokens: u.CacheCreationInputTokens,
		}
		t.hasUse = true
	case "content_block_start":
		return t.start(ev.Index, ev.ContentBlock)
	case "content_block_delta":
		return t.delta(ev.Index, ev.Delta)
	case "content_block_stop":
		return t.stop(ev.Index)
	case "message_delta":
		if r := ev.Delta.StopReason; r != "" {
			t.finish = stopReason(string(r))
		}
		t.deltaUsage(ev.Usage)
	case "message_stop":
		t.stopped = true
	}
	return nil
}

func (t *turn) start(i int64, cb sdk.ContentBlockStartEventContentBlockUnion) error {
	b := &block{kind: cb.Type}
	t.blocks[i] = b
	switch cb.Type {
	case "text":
		if cb.Text != "" {
			return t.emit(loop.Delta{Kind: loop.DeltaText, Text: cb.Text})
		}
	case "thinking":
		b.signature = cb.Signature
		if cb.Thinking != "" {
			b.thinking.WriteString(cb.Thinking)
			return t.emit(loop.Delta{Kind: loop.DeltaReasoning, Text: cb.Thinking})
		}
	case "redacted_thinking":
		b.redacted = cb.Data
	case "tool_use":
		b.input = cb.JSON.Input.Raw()
		return t.emit(loop.Delta{Kind: loop.DeltaToolCall, Index: int(i), CallID: cb.ID, Name: cb.Name})
	}
	return nil
}

func (t *turn) delta(i int64, d sdk.MessageStreamEventUnionDelta) error {
	b := t.blocks[i]
	if b == nil {
		b = &block{}
		t.blocks[i] = b
	}
	switch d.Type {
	case "text_delta":
		if d.Text != "" {
			return t.emit(loop.Delta{Kind: loop.DeltaText, Text: d.Text})
		}
	case "thinking_delta":
		if d.Thinking != "" {
			b.thinking.WriteString(d.Thinking)
			return t.emit(loop.Delta{Kind: loop.DeltaReasoning, Text: d.Thinking})
		}
	case "signature_delta":
		b.signature += d.Signature
	case "input_json_delta":
		b.partial = true
		if d.PartialJSON != "" {
			return t.emit(loop.Delta{Kind: loop.DeltaToolCall, Index: int(i), Arguments: d.PartialJSON})
		}
	}
	return nil
}

// stop finishes a block: a thinking block becomes an authoritative
// reasoning entry (its signature or redacted data round-trip on the next
// request); a tool_use block whose input came whole at its start emits it.
func (t *turn) stop(i int64) error {
	b := t.blocks[i]
	if b == nil {
		return nil
	}
	switch b.kind {
	case "thinking":
		e := loop.Entry{Kind: loop.KindReasoning, Text: b.thinking.String(), Signature: b.signature, Provider: Name}
		return t.emit(loop.Delta{Kind: loop.DeltaEntry, Entry: &e})
	case "redacted_thinking":
		e := loop.Entry{Kind: loop.KindReasoning, Redacted: b.redacted, Provider: Name}
		return t.emit(loop.Delta{Kind: loop.DeltaEntry, Entry: &e})
	case "tool_use":
		if in := strings.TrimSpace(b.input); !b.partial && in != "" && in != "{}" && in != "null" {
			return t.emit(loop.Delta{Kind: loop.DeltaToolCall, Index: int(i), Arguments: in})
		}
	}
	return nil
}

// deltaUsage folds message_delta's usage: output_tokens is cumulative; the
// input counts, when a host sends them here, replace those of message_start.
func (t *turn) deltaUsage(u sdk.MessageDeltaUsage) {
	if u.OutputTokens > 0 {
		t.usage.OutputTokens = u.OutputTokens
		t.hasUse = true
	}
	if in := u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens; in > 0 {
		t.usage.InputTokens = in
		t.usage.CacheReadTokens = u.CacheReadInputTokens
		t.usage.CacheWriteTokens = u.CacheCreationInputTokens
		t.hasUse = true
	}
}

// end emits the usage and the finish reason.
func (t *turn) end() error {
	if t.hasUse {
		t.usage.TotalTokens = t.usage.InputTokens + t.usage.OutputTokens
		if err := t.emit(loop.Delta{Kind: loop.DeltaUsage, Usage: t.usage}); err != nil {
			return err
		}
	}
	if t.finish != "" {
		return t.emit(loop.Delta{Kind: loop.DeltaFinish, Finish: t.finish})
	}
	return nil
}

// stopReason maps the API's stop reasons onto the loop's finish reasons.
func stopReason(r string) string {
	switch r {
	case "end_turn", "stop_sequence":
		return "stop"
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	}
	return r
}
