package compaction

import (
	"encoding/json"
	"math"
	"slices"
	"sort"
)

// The sticky state lives in the run's context state under StateKey as plain
// maps, slices, strings and numbers, so it survives JSON and msgpack round
// trips through checkpoints and session meta:
//
//	{version: 3, cleared: [call_id…] (sorted), offloaded: {call_id: {preview, chars, digest}},
//	 summary: {text, covered, fingerprint} | null, ratio, last_view_estimate,
//	 summary_failures, learned_windows: {"<endpoint>\x00<model>": window}}
const (
	// StateKey is the key of the policy's state in loop.CompactRequest.State.
	StateKey = "context"
	// StateVersion is the version of the state layout; any other version
	// loads as a fresh state.
	StateVersion = 3
)

// Bounds of the state.
const (
	minRatio          = 0.5
	maxRatio          = 2.5
	minLearnedWindow  = 1024
	maxLearnedWindow  = 20_000_000
	calibrationWeight = 0.2
)

// OffloadRecord is the sticky decision to show a tool result as a preview.
type OffloadRecord struct {
	// Preview is the start of the output shown in the marker.
	Preview string
	// Chars is the output's length in characters.
	Chars int
	// Digest is the output's content digest ([Digest]), the key in the
	// result store and the reference the marker names.
	Digest string
}

// Summary is the sticky running summary: Text condenses the first Covered
// body entries, whose structure hashes to Fingerprint.
type Summary struct {
	Text        string
	Covered     int
	Fingerprint string
}

// state is the decoded sticky state of one run. Parts that did not change
// are written back as the very values that were loaded (they are never
// mutated), so an unchanged state costs no copying.
type state struct {
	cleared          clearSet
	offloaded        offloadSet
	summary          *Summary
	summaryRaw       any // as loaded, reused while summary is unchanged
	summaryDirty     bool
	ratio            float64
	lastViewEstimate int
	summaryFailures  int
	learned          map[string]int
	learnedDirty     bool
	learnedRaw       map[string]any
}

// loadState decodes scratch[StateKey] leniently: a missing, garbled or
// other-version state is a fresh one; the ratio is clamped; implausible
// learned windows are dropped.
func loadState(scratch map[string]any) *state {
	st := &state{ratio: 1}
	m, _ := scratch[StateKey].(map[string]any)
	if m == nil {
		return st
	}
	if v, ok := toInt(m["version"]); !ok || v != StateVersion {
		return st
	}
	st.cleared.load(m["cleared"])
	st.offloaded.raw, _ = m["offloaded"].(map[string]any)
	if s, ok := m["summary"].(map[string]any); ok {
		text, _ := s["text"].(string)
		fp, _ := s["fingerprint"].(string)
		covered, ok := toInt(s["covered"])
		if ok && text != "" && fp != "" && covered > 0 {
			st.summary = &Summary{Text: text, Covered: covered, Fingerprint: fp}
			st.summaryRaw = s
		}
	}
	if r, ok := toFloat(m["ratio"]); ok && r > 0 {
		st.ratio = min(max(r, minRatio), maxRatio)
	}
	if v, ok := toInt(m["last_view_estimate"]); ok && v > 0 {
		st.lastViewEstimate = v
	}
	if v, ok := toInt(m["summary_failures"]); ok && v > 0 {
		st.summaryFailures = v
	}
	if lw, ok := m["learned_windows"].(map[string]any); ok && len(lw) > 0 {
		st.learned = make(map[string]int, len(lw))
		clean := true
		for k, v := range lw {
			w, ok := toInt(v)
			if !ok || w < minLearnedWindow || w > maxLearnedWindow {
				clean = false
				continue
			}
			st.learned[k] = w
		}
		if clean {
			st.learnedRaw = lw
		} else {
			st.learnedDirty = true
		}
	}
	return st
}

// encode returns the state as plain values for scratch[StateKey].
func (st *state) encode() map[string]any {
	m := map[string]any{
		"version":            StateVersion,
		"cleared":            st.cleared.encode(),
		"offloaded":          st.offloaded.encode(),
		"summary":            nil,
		"ratio":              st.ratio,
		"last_view_estimate": st.lastViewEstimate,
		"summary_failures":   st.summaryFailures,
	}
	if st.summary != nil {
		if st.summaryRaw != nil && !st.summaryDirty {
			m["summary"] = st.summaryRaw
		} else {
			m["summary"] = map[string]any{
				"text": st.summary.Text, "covered": st.summary.Covered, "fingerprint": st.summary.Fingerprint,
			}
		}
	}
	lw := map[string]any{}
	switch {
	case st.learnedRaw != nil && !st.learnedDirty:
		lw = st.learnedRaw
	default:
		for k, v := range st.learned {
			lw[k] = v
		}
	}
	m["learned_windows"] = lw
	return m
}

func (st *state) setSummary(s *Summary) {
	st.summary = s
	st.summaryRaw = nil
	st.summaryDirty = true
}

// learn records a window an overflow error named for key, when plausible.
func (st *state) learn(key string, window int) {
	if window < minLearnedWindow || window > maxLearnedWindow {
		return
	}
	if st.learned[key] == window {
		return
	}
	if st.learned == nil {
		st.learned = map[string]int{}
	}
	st.learned[key] = window
	st.learnedDirty = true
}

// calibrate folds the provider's real count for the previous view into the
// ratio: ratio ← clamp(0.8·ratio + 0.2·observed, 0.5, 2.5).
func (st *state) calibrate(lastInputTokens int64) {
	if lastInputTokens <= 0 || st.lastViewEstimate <= 0 {
		return
	}
	observed := float64(lastInputTokens) / float64(st.lastViewEstimate)
	r := (1-calibrationWeight)*st.ratio + calibrationWeight*observed
	st.ratio = min(max(r, minRatio), maxRatio)
}

// clearSet is the sorted set of cleared call ids.
type clearSet struct {
	ids   []string
	raw   []any // as loaded, valid while !dirty
	dirty bool
}

func (c *clearSet) load(v any) {
	switch x := v.(type) {
	case []any:
		c.ids = make([]string, 0, len(x))
		for _, e := range x {
			if s, ok := e.(string); ok && s != "" {
				c.ids = append(c.ids, s)
			} else {
				c.dirty = true
			}
		}
		c.raw = x
	case []string:
		c.ids = slices.Clone(x)
		c.dirty = true
	default:
		return
	}
	if !slices.IsSorted(c.ids) {
		sort.Strings(c.ids)
		c.dirty = true
	}
	if n := len(c.ids); n > 1 {
		c.ids = slices.Compact(c.ids)
		if len(c.ids) != n {
			c.dirty = true
		}
	}
}

func (c *clearSet) len() int { return len(c.ids) }

func (c *clearSet) has(id string) bool {
	_, ok := slices.BinarySearch(c.ids, id)
	return ok
}

func (c *clearSet) add(id string) bool {
	i, ok := slices.BinarySearch(c.ids, id)
	if ok {
		return false
	}
	c.ids = slices.Insert(c.ids, i, id)
	c.dirty = true
	return true
}

// keep drops the ids for which ok returns false.
func (c *clearSet) keep(ok func(string) bool) {
	n := len(c.ids)
	var out []string
	for i, id := range c.ids {
		if ok(id) {
			if out != nil {
				out = append(out, id)
			}
			continue
		}
		if out == nil {
			out = append(make([]string, 0, n), c.ids[:i]...)
		}
	}
	if out != nil {
		c.ids = out
		c.dirty = true
	}
}

func (c *clearSet) encode() []any {
	if !c.dirty && c.raw != nil {
		return c.raw
	}
	out := make([]any, len(c.ids))
	for i, id := range c.ids {
		out[i] = id
	}
	return out
}

// offloadSet is the map of offload records: the loaded map, read lazily,
// plus this call's additions and removals.
type offloadSet struct {
	raw     map[string]any
	added   map[string]OffloadRecord
	dropped map[string]bool
}

func (o *offloadSet) get(id string) (OffloadRecord, bool) {
	if o.dropped[id] {
		return OffloadRecord{}, false
	}
	if r, ok := o.added[id]; ok {
		return r, true
	}
	return decodeRecord(o.raw[id])
}

func (o *offloadSet) has(id string) bool {
	_, ok := o.get(id)
	return ok
}

func (o *offloadSet) put(id string, r OffloadRecord) {
	if o.added == nil {
		o.added = map[string]OffloadRecord{}
	}
	o.added[id] = r
	delete(o.dropped, id)
}

// keep drops the records for which ok returns false (and garbled ones).
func (o *offloadSet) keep(ok func(string) bool) {
	for id, v := range o.raw {
		if _, valid := decodeRecord(v); !valid || !ok(id) {
			if o.dropped == nil {
				o.dropped = map[string]bool{}
			}
			o.dropped[id] = true
		}
	}
	for id := range o.added {
		if !ok(id) {
			delete(o.added, id)
		}
	}
}

// empty reports cheaply that no record can exist.
func (o *offloadSet) empty() bool { return len(o.raw) == 0 && len(o.added) == 0 }

func (o *offloadSet) len() int {
	if o.empty() {
		return 0
	}
	n := len(o.added)
	for id := range o.raw {
		if !o.dropped[id] {
			if _, dup := o.added[id]; !dup {
				n++
			}
		}
	}
	return n
}

func (o *offloadSet) encode() map[string]any {
	if len(o.added) == 0 && len(o.dropped) == 0 && o.raw != nil {
		return o.raw
	}
	out := make(map[string]any, len(o.raw)+len(o.added))
	for id, v := range o.raw {
		if !o.dropped[id] {
			out[id] = v
		}
	}
	for id, r := range o.added {
		out[id] = map[string]any{"preview": r.Preview, "chars": r.Chars, "digest": r.Digest}
	}
	return out
}

func decodeRecord(v any) (OffloadRecord, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return OffloadRecord{}, false
	}
	p, ok1 := m["preview"].(string)
	d, ok2 := m["digest"].(string)
	c, ok3 := toInt(m["chars"])
	if !ok1 || !ok2 || !ok3 || d == "" {
		return OffloadRecord{}, false
	}
	return OffloadRecord{Preview: p, Chars: c, Digest: d}, true
}

// toInt reads any numeric value a JSON or msgpack decoder may produce.
func toInt(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int8:
		return int(x), true
	case int16:
		return int(x), true
	case int32:
		return int(x), true
	case int64:
		return int(x), true
	case uint:
		return int(x), true
	case uint8:
		return int(x), true
	case uint16:
		return int(x), true
	case uint32:
		return int(x), true
	case uint64:
		if x > math.MaxInt64 {
			return 0, false
		}
		return int(x), true
	case float32, float64, json.Number:
		f, ok := toFloat(x)
		if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return 0, false
		}
		return int(f), true
	}
	return 0, false
}

// toFloat reads any numeric value as a float64.
func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, !math.IsNaN(x) && !math.IsInf(x, 0)
	case float32:
		f := float64(x)
		return f, !math.IsNaN(f) && !math.IsInf(f, 0)
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	if n, ok := toInt(v); ok {
		return float64(n), true
	}
	return 0, false
}
