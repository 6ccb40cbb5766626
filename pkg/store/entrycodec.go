package store

import (
	"github.com/vmihailenco/msgpack/v5"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// EncodeMsgpack writes a segment as the reflective encoder does (a map of
// head, base, the non-empty entries and nonce; entries as maps of their
// non-empty fields, in declaration order), without its per-field
// reflection: checking each omitempty field boxes it, a dozen allocations
// per entry. TestSegmentEncodingMatchesReflection holds the bytes equal.
// Segments decode reflectively.
func (s *segRecord) EncodeMsgpack(enc *msgpack.Encoder) error {
	n := 2
	if len(s.Entries) > 0 {
		n++
	}
	if s.Write != "" {
		n++
	}
	if err := enc.EncodeMapLen(n); err != nil {
		return err
	}
	if err := enc.EncodeString("head"); err != nil {
		return err
	}
	if err := encodeHead(enc, &s.Head); err != nil {
		return err
	}
	if err := enc.EncodeString("base"); err != nil {
		return err
	}
	if err := enc.EncodeInt(int64(s.Base)); err != nil {
		return err
	}
	if len(s.Entries) > 0 {
		if err := enc.EncodeString("entries"); err != nil {
			return err
		}
		if err := enc.EncodeArrayLen(len(s.Entries)); err != nil {
			return err
		}
		for i := range s.Entries {
			if err := encodeEntry(enc, &s.Entries[i]); err != nil {
				return err
			}
		}
	}
	if s.Write != "" {
		if err := enc.EncodeString("w"); err != nil {
			return err
		}
		return enc.EncodeString(s.Write)
	}
	return nil
}

// encodeHead writes h as the reflective encoder writes a loop.RunHead
// (the fields in declaration order, the omitempty ones only when set),
// without reflection; an output of a type emptyResult does not know takes
// the reflective encoding.
func encodeHead(enc *msgpack.Encoder, h *loop.RunHead) error {
	outputEmpty, known := emptyResult(h.Output)
	if !known {
		return enc.Encode(h)
	}
	n := 5 // agent_name, usage, turns, status, updated_at
	for _, set := range [...]bool{!outputEmpty, h.Error != nil, h.LastInputTokens != 0, len(h.ContextState) > 0} {
		if set {
			n++
		}
	}
	w := recWriter{enc: enc}
	w.mapLen(n)
	w.str("agent_name", h.Agent)
	w.usage(&h.Usage)
	w.int("turns", int64(h.Turns))
	w.str("status", string(h.Status))
	if !outputEmpty {
		w.value("output", h.Output)
	}
	if h.Error != nil {
		w.value("error", h.Error)
	}
	if h.LastInputTokens != 0 {
		w.int64("last_input_tokens", h.LastInputTokens)
	}
	if len(h.ContextState) > 0 {
		w.value("context_state", h.ContextState)
	}
	w.time("updated_at", h.UpdatedAt)
	return w.failed
}

// encodeEntry writes e as the reflective encoder writes a loop.Entry.
func encodeEntry(enc *msgpack.Encoder, e *loop.Entry) error {
	strs := [...]struct {
		key, val string
	}{
		{"role", string(e.Role)}, {"content", e.Content}, {"text", e.Text}, {"id", e.ID},
		{"provider", e.Provider}, {"signature", e.Signature}, {"redacted", e.Redacted},
		{"call_id", e.CallID}, {"name", e.Name}, {"arguments", e.Arguments}, {"output", e.Output},
	}
	n := 1 // kind
	for _, f := range strs {
		if f.val != "" {
			n++
		}
	}
	if e.IsError {
		n++
	}
	if len(e.Raw) > 0 {
		n++
	}
	if len(e.Parts) > 0 {
		n++
	}
	if err := enc.EncodeMapLen(n); err != nil {
		return err
	}
	if err := encodeField(enc, "kind", string(e.Kind)); err != nil {
		return err
	}
	for _, f := range strs {
		if f.val == "" {
			continue
		}
		if err := encodeField(enc, f.key, f.val); err != nil {
			return err
		}
	}
	if e.IsError {
		if err := enc.EncodeString("is_error"); err != nil {
			return err
		}
		if err := enc.EncodeBool(true); err != nil {
			return err
		}
	}
	if len(e.Raw) > 0 {
		if err := enc.EncodeString("raw"); err != nil {
			return err
		}
		if err := enc.EncodeBytes(e.Raw); err != nil {
			return err
		}
	}
	if len(e.Parts) > 0 {
		if err := enc.EncodeString("parts"); err != nil {
			return err
		}
		return enc.Encode(e.Parts)
	}
	return nil
}

func encodeField(enc *msgpack.Encoder, key, val string) error {
	if err := enc.EncodeString(key); err != nil {
		return err
	}
	return enc.EncodeString(val)
}
