package compaction

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Stage is one step of the pipeline. Plan looks at the rendered view and
// records decisions through pc — it never changes the transcript — and
// reports whether it decided anything new. The pipeline runs stages in
// order and stops as soon as the view fits the target. A Stage is
// configuration shared by every run of the policy: Plan must be safe for
// concurrent use and keep per-run data in pc only. An error ends the
// compaction: decisions made so far are kept, and the error reaches the
// runner (the run fails).
type Stage interface {
	// Name is the stage's reason token ("offload", "clear", "summary").
	Name() string
	Plan(ctx context.Context, pc *PlanContext) (decided bool, err error)
}

// Budget is the token budget of one compaction.
type Budget struct {
	// Window is the effective context window.
	Window int
	// Reserve is kept free for the answer.
	Reserve int
	// Usable is Window − Reserve (half the window when the reserve would
	// leave nothing).
	Usable int
	// Trigger and Target are the resolved watermarks (Target < Trigger).
	Trigger int
	Target  int
	// Tail is the size of the protected tail in tokens.
	Tail int
}

// PlanContext is what a [Stage] sees of one compaction: the request, the
// body (the transcript after its leading system entries; all indices are
// body indices), the current rendering, the budget and the estimate. Its
// decision methods record sticky decisions and keep the estimate current.
type PlanContext struct {
	c          *Compaction
	req        *loop.CompactRequest
	st         *state
	ix         *bodyIndex
	est        *estimator
	head, body []loop.Entry
	r          *rendering
	raw        int // raw estimate of the current view, tools included
	budget     Budget
	protected  int
	aggressive bool
	window     int // the model's known window (0: unknown)
	newSummary *string
}

// Request is the compaction request (read-only).
func (pc *PlanContext) Request() *loop.CompactRequest { return pc.req }

// Body is the transcript after its leading system entries (read-only).
func (pc *PlanContext) Body() []loop.Entry { return pc.body }

// Rendered returns how body[i] appears in the view now (i ≥ Covered()).
func (pc *PlanContext) Rendered(i int) loop.Entry { return *pc.r.at(i) }

// Covered is the number of body entries folded into the summary.
func (pc *PlanContext) Covered() int { return pc.r.covered }

// Protected is the first body index of the protected tail: stages leave
// entries at or after it alone (the reactive offload of an oversized
// result is the one exception).
func (pc *PlanContext) Protected() int { return pc.protected }

// Budget is the token budget of this compaction.
func (pc *PlanContext) Budget() Budget { return pc.budget }

// Tokens is the calibrated estimate of the current view, tools included.
func (pc *PlanContext) Tokens() int { return pc.est.calibrated(pc.raw) }

// Fits reports whether the view is at or below the target.
func (pc *PlanContext) Fits() bool { return pc.Tokens() <= pc.budget.Target }

// Aggressive is true on the reactive path, after the endpoint rejected a
// prompt as too long.
func (pc *PlanContext) Aggressive() bool { return pc.aggressive }

// ModelWindow is the model's known context window (0 when unknown).
func (pc *PlanContext) ModelWindow() int { return pc.window }

// Store is the policy's result store (nil when none).
func (pc *PlanContext) Store() ResultStore { return pc.c.cfg.Store }

// Logger is the policy's logger.
func (pc *PlanContext) Logger() *slog.Logger { return pc.c.log }

// EntryTokens is the calibrated estimate of one entry.
func (pc *PlanContext) EntryTokens(e *loop.Entry) int { return pc.est.calibrated(pc.est.entry(e)) }

// Candidates returns the body indices of the tool results a stage may
// decide on, oldest first: outside the summary and carrying a call id no
// other result carries. Protection (tail, newest results) is the stage's
// business.
func (pc *PlanContext) Candidates() []int {
	out := make([]int, 0, len(pc.ix.results))
	for _, i := range pc.ix.results {
		if i >= pc.r.covered && pc.ix.unique(pc.body[i].CallID) {
			out = append(out, i)
		}
	}
	return out
}

// KeepFrom returns the body index of the keep-th newest tool result: the
// newest keep results are at or after it (len(Body()) when keep ≤ 0).
func (pc *PlanContext) KeepFrom(keep int) int {
	if keep <= 0 {
		return len(pc.body)
	}
	rs := pc.ix.results
	if keep >= len(rs) {
		return 0
	}
	return rs[len(rs)-keep]
}

// Cleared reports whether the result with callID is cleared.
func (pc *PlanContext) Cleared(callID string) bool { return pc.st.cleared.has(callID) }

// Offloaded returns the offload record of the result with callID.
func (pc *PlanContext) Offloaded(callID string) (OffloadRecord, bool) {
	return pc.st.offloaded.get(callID)
}

// decidable reports whether body[i] is a result a stage may decide on.
func (pc *PlanContext) decidable(i int) bool {
	return i >= pc.r.covered && i < len(pc.body) && pc.body[i].Kind == loop.KindToolResult &&
		pc.ix.unique(pc.body[i].CallID)
}

// Clear records that body[i], a tool result, is shown as the clear marker
// from now on. It returns false (and records nothing) when body[i] is not
// a candidate or is cleared already.
func (pc *PlanContext) Clear(i int) bool {
	if !pc.decidable(i) {
		return false
	}
	e := &pc.body[i]
	if !pc.st.cleared.add(e.CallID) {
		return false
	}
	pc.replace(i, markerEntry(e, ClearMarker(e.CallID)))
	return true
}

// Offload records that body[i], a tool result, is shown as a preview
// marker from now on. It returns false (and records nothing) when body[i]
// is not a candidate or is cleared or offloaded already. Archiving the
// output in the store is the caller's business.
func (pc *PlanContext) Offload(i int, rec OffloadRecord) bool {
	if !pc.decidable(i) {
		return false
	}
	e := &pc.body[i]
	if pc.st.cleared.has(e.CallID) || pc.st.offloaded.has(e.CallID) {
		return false
	}
	pc.st.offloaded.put(e.CallID, rec)
	pc.replace(i, markerEntry(e, OffloadMarker(rec)))
	return true
}

func (pc *PlanContext) replace(i int, m loop.Entry) {
	at := pc.r.at(i)
	pc.raw += pc.est.entry(&m) - pc.est.entry(at)
	*at = m
}

// Summary returns the current summary (nil when none).
func (pc *PlanContext) Summary() *Summary {
	if pc.st.summary == nil {
		return nil
	}
	s := *pc.st.summary
	return &s
}

// SetSummary records text as the summary of the first covered body
// entries. covered must grow the current coverage, stay below the
// protected tail and not separate a call from its result.
func (pc *PlanContext) SetSummary(text string, covered int) error {
	switch {
	case text == "":
		return fmt.Errorf("compaction: empty summary")
	case covered <= pc.r.covered || covered > pc.protected:
		return fmt.Errorf("compaction: summary coverage %d outside (%d, %d]", covered, pc.r.covered, pc.protected)
	case !pc.ix.safe(covered):
		return fmt.Errorf("compaction: summary coverage %d separates a tool call from its result", covered)
	}
	pc.st.setSummary(&Summary{Text: text, Covered: covered, Fingerprint: fingerprint(pc.body[:covered])})
	pc.newSummary = &text
	pc.rerender()
	return nil
}

// rerender rebuilds the view from the state and re-estimates it.
func (pc *PlanContext) rerender() {
	pc.r = render(pc.head, pc.body, pc.st)
	pc.raw = pc.est.view(pc.r.out)
}
