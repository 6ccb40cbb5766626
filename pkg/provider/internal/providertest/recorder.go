package providertest

import (
	"sort"
	"strings"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Recorder collects the deltas a provider emits and assembles them the way
// the loop does, for assertions.
type Recorder struct {
	Deltas []loop.Delta
}

// Emit records d; pass it as the provider's emit function.
func (r *Recorder) Emit(d loop.Delta) error {
	r.Deltas = append(r.Deltas, d)
	return nil
}

// Reset forgets what was recorded (as the loop does before a retry).
func (r *Recorder) Reset() { r.Deltas = nil }

// Kinds lists the recorded delta kinds in order.
func (r *Recorder) Kinds() []loop.DeltaKind {
	out := make([]loop.DeltaKind, len(r.Deltas))
	for i, d := range r.Deltas {
		out[i] = d.Kind
	}
	return out
}

// Count counts the recorded deltas of kind k.
func (r *Recorder) Count(k loop.DeltaKind) int {
	n := 0
	for _, d := range r.Deltas {
		if d.Kind == k {
			n++
		}
	}
	return n
}

// Text concatenates the text deltas.
func (r *Recorder) Text() string { return r.join(loop.DeltaText) }

// Reasoning concatenates the reasoning deltas.
func (r *Recorder) Reasoning() string { return r.join(loop.DeltaReasoning) }

func (r *Recorder) join(k loop.DeltaKind) string {
	var b strings.Builder
	for _, d := range r.Deltas {
		if d.Kind == k {
			b.WriteString(d.Text)
		}
	}
	return b.String()
}

// Usage is the last usage delta (zero when none).
func (r *Recorder) Usage() loop.Usage {
	var u loop.Usage
	for _, d := range r.Deltas {
		if d.Kind == loop.DeltaUsage {
			u = d.Usage
		}
	}
	return u
}

// Finish is the last finish reason.
func (r *Recorder) Finish() string {
	f := ""
	for _, d := range r.Deltas {
		if d.Kind == loop.DeltaFinish {
			f = d.Finish
		}
	}
	return f
}

// Entries lists the provider-authoritative entries.
func (r *Recorder) Entries() []loop.Entry {
	var out []loop.Entry
	for _, d := range r.Deltas {
		if d.Kind == loop.DeltaEntry && d.Entry != nil {
			out = append(out, *d.Entry)
		}
	}
	return out
}

// Calls assembles the tool-call fragments by index: id and name from the
// latest non-empty fragment, arguments concatenated ("{}" when empty),
// sorted by index.
func (r *Recorder) Calls() []loop.Entry {
	type slot struct {
		id, name string
		args     strings.Builder
	}
	slots := map[int]*slot{}
	for _, d := range r.Deltas {
		if d.Kind != loop.DeltaToolCall {
			continue
		}
		s := slots[d.Index]
		if s == nil {
			s = &slot{}
			slots[d.Index] = s
		}
		if d.CallID != "" {
			s.id = d.CallID
		}
		if d.Name != "" {
			s.name = d.Name
		}
		s.args.WriteString(d.Arguments)
	}
	idx := make([]int, 0, len(slots))
	for i := range slots {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	out := make([]loop.Entry, 0, len(idx))
	for _, i := range idx {
		s := slots[i]
		args := s.args.String()
		if args == "" {
			args = "{}"
		}
		out = append(out, loop.ToolCallEntry(s.id, s.name, args))
	}
	return out
}
