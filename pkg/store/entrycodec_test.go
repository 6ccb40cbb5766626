package store

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// segNoCodec is segRecord without its EncodeMsgpack: the reflective
// encoding the custom one must equal.
type segNoCodec struct {
	Head    loop.RunHead `msgpack:"head"`
	Base    int          `msgpack:"base"`
	Entries []loop.Entry `msgpack:"entries,omitempty"`
	Write   string       `msgpack:"w,omitempty"`
}

// TestSegmentEncodingMatchesReflection: a segment encodes to the same
// bytes as the reflective encoder writes, for every kind of entry, an
// empty append and large bases, and decodes back to what was written.
func TestSegmentEncodingMatchesReflection(t *testing.T) {
	t.Parallel()
	head := loop.RunHead{Agent: "a", Turns: 3, Status: loop.StatusCompleted, Output: map[string]any{"k": []any{1.5, "x"}},
		Error: &loop.ErrorInfo{Type: "T", Message: "m"}, LastInputTokens: 7, ContextState: map[string]any{"s": true},
		Usage: loop.Usage{InputTokens: 10, OutputTokens: 3}, UpdatedAt: time.Unix(1700000000, 5).UTC()}
	full := loop.Entry{Kind: loop.KindToolResult, Role: loop.RoleUser, Content: "c", Text: "t", ID: "i", Provider: "p",
		Signature: "s", Redacted: "r", CallID: "c1", Name: "n", Arguments: `{"a":1}`, Output: "o", IsError: true,
		Raw: json.RawMessage(`{"raw":true}`), Parts: []loop.Part{{Type: loop.PartText, Text: "x"}, {Type: loop.PartImage, URL: "u", MimeType: "image/png"}}}
	for name, s := range map[string]segRecord{
		"empty append":  {Head: loop.RunHead{Agent: "a", Status: loop.StatusRunning}, Base: 4},
		"no nonce":      {Head: head, Entries: []loop.Entry{loop.UserText("hi")}},
		"every field":   {Head: head, Base: 1 << 40, Entries: []loop.Entry{full, {Kind: loop.KindInput}}, Write: "nonce"},
		"a model turn":  {Head: head, Base: 300, Entries: []loop.Entry{loop.AssistantText("ok"), loop.ToolCallEntry("c1", "echo", `{"text":"84"}`)}, Write: "w"},
		"a tool result": {Head: head, Base: -1, Entries: []loop.Entry{loop.ToolResultEntry("c1", "echo", "84", false)}, Write: "w"},
		"a plain head":  {Head: loop.RunHead{Agent: "calc", Turns: 1, Status: loop.StatusRunning, UpdatedAt: time.Unix(1700000000, 0)}, Base: 2},
		"empty output":  {Head: loop.RunHead{Agent: "a", Output: map[string]any{}, ContextState: map[string]any{}, Usage: loop.Usage{TotalTokens: 1 << 40}}},
		"string output": {Head: loop.RunHead{Agent: "a", Output: "84", Error: &loop.ErrorInfo{Type: "T", Hint: "h", Retryable: true}, LastInputTokens: -3}},
		"struct output": {Head: loop.RunHead{Agent: "a", Output: struct{ A int }{1}}},
		"number output": {Head: loop.RunHead{Agent: "a", Output: 0.0, Turns: 1 << 20}},
	} {
		got, err := marshal(&s)
		require.NoError(t, err, name)
		ref := segNoCodec(s)
		want, err := marshal(&ref)
		require.NoError(t, err, name)
		require.Equal(t, want, got, "%s: the custom encoding differs from the reflective one", name)

		var back segRecord
		require.NoError(t, unmarshal(got[1:], &back), name)
		require.Equal(t, len(s.Entries), len(back.Entries), name)
		for i := range s.Entries {
			wj, _ := json.Marshal(s.Entries[i])
			gj, _ := json.Marshal(back.Entries[i])
			require.JSONEq(t, string(wj), string(gj), "%s: entry %d", name, i)
		}
		require.Equal(t, s.Base, back.Base, name)
		require.Equal(t, s.Write, back.Write, name)
	}
}

// TestEntryCodecKnowsEveryField fails when loop.Entry gains a field that
// encodeEntry does not write (it would be dropped from checkpoints).
func TestEntryCodecKnowsEveryField(t *testing.T) {
	t.Parallel()
	var tags []string
	typ := reflect.TypeOf(loop.Entry{})
	for i := range typ.NumField() {
		tag, _, _ := strings.Cut(typ.Field(i).Tag.Get("msgpack"), ",")
		tags = append(tags, tag)
	}
	require.Equal(t, []string{"kind", "role", "content", "text", "id", "provider", "signature", "redacted",
		"call_id", "name", "arguments", "output", "is_error", "raw", "parts"}, tags,
		"loop.Entry's fields changed: make encodeEntry (entrycodec.go) write them, in declaration order")
}

// TestHeadCodecKnowsEveryField fails when loop.RunHead (or loop.Usage)
// gains a field that encodeHead does not write (it would be dropped from
// checkpoints).
func TestHeadCodecKnowsEveryField(t *testing.T) {
	t.Parallel()
	tags := msgpackTags
	require.Equal(t, []string{"agent_name", "usage", "turns", "status", "output", "error", "last_input_tokens", "context_state", "updated_at"},
		tags(loop.RunHead{}), "loop.RunHead's fields changed: make encodeHead (entrycodec.go) write them, in declaration order")
	require.Equal(t, []string{"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "total_tokens"},
		tags(loop.Usage{}), "loop.Usage's fields changed: make encodeHead (entrycodec.go) write them, in declaration order")
}
