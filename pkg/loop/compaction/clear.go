package compaction

import (
	"context"
	"unicode/utf8"
)

// Clear replaces older tool results with a marker that keeps the call id
// and the error flag and names the recall call (as
// Anthropic's clear_tool_uses): oldest first, while the view is above the
// target, every result outside the newest KeepLast and the protected tail
// with at least MinChars characters (results with content parts always
// qualify). On the reactive path it keeps only the newest result and
// ignores MinChars. The zero value is lovia's default.
type Clear struct {
	// KeepLast newest results stay verbatim (0: 3; None: none).
	KeepLast int
	// MinChars is the smallest output cleared (0: 200; None: any).
	MinChars int
	// ClearAtLeastTokens keeps clearing, once started, until at least this
	// many tokens were freed even below the target (0: stop at the target).
	ClearAtLeastTokens int
}

// Name implements Stage.
func (Clear) Name() string { return "clear" }

// Plan implements Stage.
func (c Clear) Plan(_ context.Context, pc *PlanContext) (bool, error) {
	keep, minChars := orDefault(c.KeepLast, 3), orDefault(c.MinChars, 200)
	if pc.aggressive {
		keep, minChars = 1, 0
	}
	limit := min(pc.KeepFrom(keep), pc.protected)
	decided, freed := false, 0
	for _, i := range pc.Candidates() {
		if i >= limit || (pc.Fits() && freed >= c.ClearAtLeastTokens) {
			break
		}
		e := &pc.body[i]
		if pc.Cleared(e.CallID) {
			continue
		}
		if len(e.Parts) == 0 && (len(e.Output) < minChars || utf8.RuneCountInString(e.Output) < minChars) {
			continue
		}
		before := pc.Tokens()
		if pc.Clear(i) {
			decided = true
			freed += before - pc.Tokens()
		}
	}
	return decided, nil
}
