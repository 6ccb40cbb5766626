package store

import (
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// EncodeMsgpack writes a run record as the reflective encoder does (a map
// of its non-empty fields, in declaration order; an attempt as a map of
// its fields, worker and version omitted when empty), without its per-field
// reflection: the omitempty checks box each field, about 25 allocations a
// record, and a run writes its record three times.
// TestRunRecordEncodingMatchesReflection holds the bytes equal. Records
// decode reflectively.
func (r *RunRecord) EncodeMsgpack(enc *msgpack.Encoder) error {
	resultEmpty, known := emptyResult(r.Result)
	if !known {
		// A result of a type the emptiness rule below does not cover
		// (a struct, a type with IsZero…): the reflective encoding.
		return enc.Encode((*plainRecord)(r))
	}
	// A *loop.Usage is omitted when nil or when its IsZero says so (the
	// reflective encoder asks types with IsZero).
	hasUsage := r.Usage != nil && !r.Usage.IsZero()
	type strField struct{ key, val string }
	strs := [...]strField{{"session_id", r.SessionID}, {"parent_run_id", r.ParentRunID}, {"worker", r.Worker}}
	n := 7 // run_id, agent, status, attempt, turns, created_at, updated_at
	for _, f := range strs {
		if f.val != "" {
			n++
		}
	}
	for _, set := range [...]bool{
		!resultEmpty, hasUsage, r.FinalAgent != "", r.FinishReason != nil, r.Submissions != 0,
		r.RequestSeq != 0, r.Quiet, r.Requeues != 0, r.Parked != nil, r.Wakes != 0, len(r.Attempts) > 0,
		r.AttemptsDropped != 0, r.Registry != 0, r.Version != "", r.Error != nil, len(r.Metadata) > 0, r.InputDigest != "",
		!r.StartedAt.IsZero(), !r.FinishedAt.IsZero(),
	} {
		if set {
			n++
		}
	}
	w := recWriter{enc: enc}
	w.mapLen(n)
	w.str("run_id", r.RunID)
	w.str("agent", r.Agent)
	w.optStr("session_id", r.SessionID)
	w.optStr("parent_run_id", r.ParentRunID)
	w.key("status")
	w.err(enc.EncodeString(string(r.Status)))
	w.optStr("worker", r.Worker)
	w.key("attempt")
	w.err(enc.EncodeInt(int64(r.Attempt)))
	w.key("turns")
	w.err(enc.EncodeInt(int64(r.Turns)))
	if !resultEmpty {
		w.value("result", r.Result)
	}
	if hasUsage {
		w.usage(r.Usage)
	}
	w.optStr("final_agent", r.FinalAgent)
	if r.FinishReason != nil {
		w.key("finish_reason")
		w.err(enc.EncodeString(*r.FinishReason))
	}
	w.optInt("submissions", int64(r.Submissions))
	if r.RequestSeq != 0 {
		w.key("request_seq")
		w.err(enc.EncodeUint64(r.RequestSeq)) // uint64 fields are not compacted
	}
	if r.Quiet {
		w.key("quiet")
		w.err(enc.EncodeBool(true))
	}
	w.optInt("requeues", int64(r.Requeues))
	if r.Parked != nil {
		w.value("parked", r.Parked)
	}
	w.optInt("wakes", int64(r.Wakes))
	if len(r.Attempts) > 0 {
		w.key("attempts")
		w.err(enc.EncodeArrayLen(len(r.Attempts)))
		for i := range r.Attempts {
			a := &r.Attempts[i]
			n := 4 // n, kind, attempt, at
			for _, s := range [...]string{a.Worker, a.Version} {
				if s != "" {
					n++
				}
			}
			w.mapLen(n)
			w.key("n")
			w.err(enc.EncodeInt(int64(a.N)))
			w.key("kind")
			w.err(enc.EncodeString(a.Kind))
			w.key("attempt")
			w.err(enc.EncodeInt(int64(a.Attempt)))
			w.optStr("worker", a.Worker)
			w.optStr("version", a.Version)
			w.time("at", a.At)
		}
	}
	w.optInt("attempts_dropped", int64(r.AttemptsDropped))
	if r.Registry != 0 {
		w.key("registry_revision")
		w.err(enc.EncodeUint64(r.Registry))
	}
	w.optStr("version", r.Version)
	if r.Error != nil {
		w.value("error", r.Error)
	}
	if len(r.Metadata) > 0 {
		w.value("metadata", r.Metadata)
	}
	w.optStr("input_digest", r.InputDigest)
	w.time("created_at", r.CreatedAt)
	w.time("updated_at", r.UpdatedAt)
	if !r.StartedAt.IsZero() {
		w.time("started_at", r.StartedAt)
	}
	if !r.FinishedAt.IsZero() {
		w.time("finished_at", r.FinishedAt)
	}
	return w.failed
}

// plainRecord is RunRecord without its EncodeMsgpack.
type plainRecord RunRecord

// emptyResult reports whether the reflective encoder omits v as an
// omitempty interface field (nil, or a dynamic value that is empty:
// "", false, 0, an empty map or slice), for the types a result decoded
// from JSON or msgpack has; known is false for any other type.
func emptyResult(v any) (empty, known bool) {
	switch x := v.(type) {
	case nil:
		return true, true
	case string:
		return x == "", true
	case bool:
		return !x, true
	case float64:
		return x == 0, true
	case int64:
		return x == 0, true
	case uint64:
		return x == 0, true
	case int:
		return x == 0, true
	case map[string]any:
		return len(x) == 0, true
	case []any:
		return len(x) == 0, true
	}
	return false, false
}

// recWriter writes map entries and keeps the first error.
type recWriter struct {
	enc    *msgpack.Encoder
	failed error
}

func (w *recWriter) err(err error) {
	if w.failed == nil {
		w.failed = err
	}
}

func (w *recWriter) mapLen(n int) { w.err(w.enc.EncodeMapLen(n)) }

func (w *recWriter) key(k string) { w.err(w.enc.EncodeString(k)) }

func (w *recWriter) str(k, v string) {
	w.key(k)
	w.err(w.enc.EncodeString(v))
}

// optStr writes an omitempty string field.
func (w *recWriter) optStr(k, v string) {
	if v != "" {
		w.str(k, v)
	}
}

func (w *recWriter) int(k string, v int64) {
	w.key(k)
	w.err(w.enc.EncodeInt(v))
}

func (w *recWriter) int64(k string, v int64) {
	w.key(k)
	w.err(w.enc.EncodeInt64(v))
}

// optInt writes an omitempty int field.
func (w *recWriter) optInt(k string, v int64) {
	if v != 0 {
		w.int(k, v)
	}
}

// usage writes a usage field as the reflective encoder writes a
// loop.Usage (int64 fields are not compacted, unlike int ones).
func (w *recWriter) usage(u *loop.Usage) {
	w.key("usage")
	w.mapLen(5)
	w.int64("input_tokens", u.InputTokens)
	w.int64("output_tokens", u.OutputTokens)
	w.int64("cache_read_tokens", u.CacheReadTokens)
	w.int64("cache_write_tokens", u.CacheWriteTokens)
	w.int64("total_tokens", u.TotalTokens)
}

func (w *recWriter) time(k string, t time.Time) {
	w.key(k)
	w.err(w.enc.EncodeTime(t))
}

func (w *recWriter) value(k string, v any) {
	w.key(k)
	w.err(w.enc.Encode(v))
}
