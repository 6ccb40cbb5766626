package compaction

import (
	"context"
	"unicode/utf8"
)

// Offload shows huge tool results as a preview:
// oldest first, while the view is above the target, each result of at
// least MinChars characters outside the newest KeepLast results and the
// protected tail is replaced by a marker with its size, a preview and the
// digest recall_tool_result takes. The full output is archived in the
// store first (a store failure is logged; the marker is applied anyway:
// the transcript still holds the output). On the reactive path a result
// that alone exceeds the target loses its protection. Results with content
// parts are left to [Clear]. The zero value is lovia's default.
type Offload struct {
	// MinChars is the smallest output offloaded (0: 4000; None: any).
	MinChars int
	// KeepLast newest results stay verbatim (0: 2; None: none).
	KeepLast int
	// PreviewChars is the length of the preview (0: 400; None: none).
	PreviewChars int
}

// Name implements Stage.
func (Offload) Name() string { return "offload" }

// Plan implements Stage.
func (o Offload) Plan(ctx context.Context, pc *PlanContext) (bool, error) {
	minChars := orDefault(o.MinChars, 4000)
	keepFrom := pc.KeepFrom(orDefault(o.KeepLast, 2))
	preview := orDefault(o.PreviewChars, 400)
	decided := false
	for _, i := range pc.Candidates() {
		if pc.Fits() {
			break
		}
		e := &pc.body[i]
		if len(e.Parts) > 0 || len(e.Output) < minChars || pc.Cleared(e.CallID) {
			continue
		}
		if _, done := pc.Offloaded(e.CallID); done {
			continue
		}
		chars := utf8.RuneCountInString(e.Output)
		if chars < minChars {
			continue
		}
		if i >= pc.protected || i >= keepFrom {
			oversized := pc.aggressive && pc.EntryTokens(e) > pc.budget.Target
			if !oversized {
				continue
			}
		}
		rec := OffloadRecord{Preview: firstRunes(e.Output, preview), Chars: chars, Digest: Digest(e.Output)}
		if s := pc.Store(); s != nil {
			if err := s.Put(ctx, rec.Digest, e.Output); err != nil {
				pc.Logger().Warn("compaction: result store put failed; offloading anyway", "digest", rec.Digest, "call_id", e.CallID, "error", err)
			}
		}
		if pc.Offload(i, rec) {
			decided = true
		}
	}
	return decided, nil
}

// orDefault resolves a field whose zero value means def and None zero.
func orDefault(v, def int) int {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// firstRunes returns the first n characters of s.
func firstRunes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}
