package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/respjson"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// turn turns the chunks of one streamed completion into deltas.
type turn struct {
	p         *Provider
	emit      func(loop.Delta) error
	reasoning strings.Builder
	usage     *loop.Usage
	finish    string
	// Tool-call slots for servers that omit "index" on tool-call fragments:
	// a fragment with a new id opens the next slot.
	lastSlot, nextSlot int
	lastID             string
}

func newTurn(p *Provider, emit func(loop.Delta) error) *turn {
	return &turn{p: p, emit: emit}
}

// finished reports whether the stream named a finish reason.
func (t *turn) finished() bool { return t.finish != "" }

// event handles one SSE event's data; done is true at "[DONE]".
func (t *turn) event(data []byte) (done bool, err error) {
	data = bytes.TrimSpace(data)
	switch {
	case len(data) == 0:
		return false, nil
	case bytes.Equal(data, []byte("[DONE]")):
		return true, nil
	}
	var probe struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &probe) == nil && len(probe.Error) > 0 && !bytes.Equal(probe.Error, []byte("null")) {
		return false, t.p.chunkError(data)
	}
	var c oai.ChatCompletionChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return false, t.malformed(data, err)
	}
	if c.JSON.Usage.Valid() {
		u := usageOf(c.Usage)
		t.usage = &u
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // only one choice is requested
		}
		if err := t.delta(&ch.Delta); err != nil {
			return false, err
		}
		if ch.FinishReason != "" {
			t.finish = finishReason(ch.FinishReason)
		}
	}
	return false, nil
}

func (t *turn) delta(d *oai.ChatCompletionChunkChoiceDelta) error {
	if r := reasoningOf(d.JSON.ExtraFields); r != "" {
		t.reasoning.WriteString(r)
		if err := t.emit(loop.Delta{Kind: loop.DeltaReasoning, Text: r}); err != nil {
			return err
		}
	}
	for _, s := range []string{d.Content, d.Refusal} {
		if s == "" {
			continue
		}
		if err := t.emit(loop.Delta{Kind: loop.DeltaText, Text: s}); err != nil {
			return err
		}
	}
	for i := range d.ToolCalls {
		tc := &d.ToolCalls[i]
		slot := int(tc.Index)
		if !tc.JSON.Index.Valid() {
			slot = t.lastSlot
			if tc.ID != "" && tc.ID != t.lastID {
				slot = t.nextSlot
			}
		}
		t.lastSlot = slot
		if slot >= t.nextSlot {
			t.nextSlot = slot + 1
		}
		if tc.ID != "" {
			t.lastID = tc.ID
		}
		if err := t.emit(loop.Delta{
			Kind:      loop.DeltaToolCall,
			Index:     slot,
			CallID:    tc.ID,
			Name:      tc.Function.Name,
			Arguments: tc.Function.Arguments,
		}); err != nil {
			return err
		}
	}
	return nil
}

// completion handles a whole (non-streamed) chat completion body.
func (t *turn) completion(body []byte) error {
	var c oai.ChatCompletion
	if err := json.Unmarshal(body, &c); err != nil {
		return t.malformed(body, err)
	}
	if c.JSON.Usage.Valid() {
		u := usageOf(c.Usage)
		t.usage = &u
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue
		}
		m := &ch.Message
		if r := reasoningOf(m.JSON.ExtraFields); r != "" {
			t.reasoning.WriteString(r)
			if err := t.emit(loop.Delta{Kind: loop.DeltaReasoning, Text: r}); err != nil {
				return err
			}
		}
		for _, s := range []string{m.Content, m.Refusal} {
			if s == "" {
				continue
			}
			if err := t.emit(loop.Delta{Kind: loop.DeltaText, Text: s}); err != nil {
				return err
			}
		}
		for j, tc := range m.ToolCalls {
			if err := t.emit(loop.Delta{Kind: loop.DeltaToolCall, Index: j, CallID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}); err != nil {
				return err
			}
		}
		t.finish = finishReason(ch.FinishReason)
	}
	if t.finish == "" {
		t.finish = "stop"
	}
	return nil
}

// end emits what is known only once the stream finished: the reasoning as
// an authoritative entry (so it carries this adapter's name for replay),
// the usage and the finish reason.
func (t *turn) end() error {
	if t.reasoning.Len() > 0 {
		e := loop.Entry{Kind: loop.KindReasoning, Text: t.reasoning.String(), Provider: Name}
		if err := t.emit(loop.Delta{Kind: loop.DeltaEntry, Entry: &e}); err != nil {
			return err
		}
	}
	if t.usage != nil {
		if err := t.emit(loop.Delta{Kind: loop.DeltaUsage, Usage: *t.usage}); err != nil {
			return err
		}
	}
	if t.finish != "" {
		return t.emit(loop.Delta{Kind: loop.DeltaFinish, Finish: t.finish})
	}
	return nil
}

func (t *turn) malformed(data []byte, err error) error {
	return &loop.ProviderError{
		Message:   fmt.Sprintf("openai: %s sent data that is not a chat completion chunk: %v", t.p.cfg.BaseURL, err),
		Hint:      "the base URL may point at a server that does not speak the Chat Completions API",
		Vendor:    Name,
		Model:     t.p.cfg.Model,
		Retryable: loop.RetryUnknown,
		Body:      string(data),
		Cause:     err,
	}
}

// reasoningOf reads the reasoning text compatible servers put next to the
// content: "reasoning_content" (DeepSeek, vLLM, Moonshot) or "reasoning"
// (Ollama, OpenRouter, newer vLLM). The SDK keeps unknown fields as raw
// JSON (and does not mark them Valid).
func reasoningOf(extra map[string]respjson.Field) string {
	for _, k := range []string{"reasoning_content", "reasoning"} {
		var s string
		if f, ok := extra[k]; ok && json.Unmarshal([]byte(f.Raw()), &s) == nil && s != "" {
			return s
		}
	}
	return ""
}

// usageOf maps the usage object: prompt_tokens already includes cached
// tokens, which cached_tokens (or DeepSeek's prompt_cache_hit_tokens)
// subdivides.
func usageOf(u oai.CompletionUsage) loop.Usage {
	out := loop.Usage{
		InputTokens:      u.PromptTokens,
		OutputTokens:     u.CompletionTokens,
		CacheReadTokens:  u.PromptTokensDetails.CachedTokens,
		CacheWriteTokens: u.PromptTokensDetails.CacheWriteTokens,
	}
	if out.CacheReadTokens == 0 {
		// The SDK marks unknown fields as not Valid but keeps their raw text.
		var n int64
		if f, ok := u.JSON.ExtraFields["prompt_cache_hit_tokens"]; ok && json.Unmarshal([]byte(f.Raw()), &n) == nil {
			out.CacheReadTokens = n
		}
	}
	out.TotalTokens = out.InputTokens + out.OutputTokens
	return out
}

// finishReason maps the API's finish reasons onto the loop's names.
func finishReason(r string) string {
	if r == "function_call" {
		return "tool_calls"
	}
	return r
}
