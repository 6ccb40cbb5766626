package compaction

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Summarize folds old history into a running, sectioned summary:
// the rendered body from the current coverage up
// to the protected tail is handed to the [Summarizer] in chunks of at most
// half the usable window (and half of the model's and the summarizer's
// windows), each ending where no call is separated from its result. Every
// accepted chunk commits its coverage at once; in the view the covered
// prefix becomes one user entry ([SummaryText]).
//
// It is skipped proactively when it would save less than MinSavingsRatio
// of the view, or when MaxFailures consecutive summaries failed (the
// circuit breaker; the reactive path still tries, as a half-open probe).
// A failed, empty or oversized summary counts as a failure and ends the
// stage without an error. The zero value is lovia's default.
type Summarize struct {
	// MinSavingsRatio is the smallest projected saving, as a share of the
	// view, worth a summary (0: 0.10; negative: any saving).
	MinSavingsRatio float64
	// MaxFailures consecutive failures trip the breaker (0: 3; negative:
	// never).
	MaxFailures int
	// MaxSummaryChars rejects longer summaries (0: 16000).
	MaxSummaryChars int
}

// Name implements Stage.
func (Summarize) Name() string { return "summary" }

// Plan implements Stage.
func (s Summarize) Plan(ctx context.Context, pc *PlanContext) (bool, error) {
	minSavings := s.MinSavingsRatio
	switch {
	case minSavings == 0:
		minSavings = 0.10
	case minSavings < 0:
		minSavings = 0
	}
	maxFailures := s.MaxFailures
	if maxFailures == 0 {
		maxFailures = 3
	}
	maxChars := s.MaxSummaryChars
	if maxChars <= 0 {
		maxChars = 16000
	}
	start, end := pc.r.covered, pc.protected
	if end <= start {
		return false, nil
	}
	st := pc.st
	if !pc.aggressive && maxFailures > 0 && st.summaryFailures >= maxFailures {
		return false, nil
	}
	if !pc.aggressive {
		span := pc.est.calibrated(pc.est.raw(pc.r.body(start, end)))
		prior := 512
		if st.summary != nil {
			prior = pc.EntryTokens(&pc.r.out[pc.r.off-1])
		}
		if float64(span-max(256, prior)) < minSavings*float64(pc.Tokens()) {
			return false, nil
		}
	}
	chunkCap := max(pc.budget.Usable/2, 1)
	if pc.window > 0 {
		chunkCap = min(chunkCap, max(pc.window/2, 1))
	}
	sum := pc.c.cfg.Summarizer
	if sw, ok := sum.(SummarizerWindow); ok && sw.ContextWindow() > 0 {
		chunkCap = min(chunkCap, max(sw.ContextWindow()/2, 1))
	}
	decided := false
	for start < end {
		cut := pc.chunkEnd(start, end, chunkCap)
		req := &SummaryRequest{Provider: pc.req.Provider, Model: pc.req.Model, Entries: pc.r.body(start, cut), AddUsage: pc.req.AddUsage}
		if st.summary != nil {
			req.Prior = st.summary.Text
		}
		text, err := sum.Summarize(ctx, req)
		if ctx.Err() != nil {
			// Cancellation is not the summarizer's failure; the model
			// call that follows reports it.
			return decided, nil
		}
		text = strings.TrimSpace(text)
		switch {
		case err != nil:
		case text == "":
			err = fmt.Errorf("%w: empty summary", ErrSummaryRejected)
		case utf8.RuneCountInString(text) > maxChars:
			err = fmt.Errorf("%w: summary of %d chars exceeds %d", ErrSummaryRejected, utf8.RuneCountInString(text), maxChars)
		}
		if err != nil {
			st.summaryFailures++
			pc.Logger().Warn("compaction: summary failed", "failures", st.summaryFailures, "error", err,
				"breaker_open", maxFailures > 0 && st.summaryFailures >= maxFailures)
			return decided, nil
		}
		st.summaryFailures = 0
		if err := pc.SetSummary(text, cut); err != nil {
			return decided, fmt.Errorf("compaction: summarize: %w", err)
		}
		decided = true
		start = cut
	}
	return decided, nil
}

// chunkEnd returns the end of the next chunk to fold from start: the last
// pair-safe cut whose rendered span fits chunkCap tokens, or the first
// pair-safe cut after start when none does.
func (pc *PlanContext) chunkEnd(start, end, chunkCap int) int {
	acc, last := 0, 0
	for i := start; i < end; i++ {
		acc += pc.est.entry(pc.r.at(i))
		c := i + 1
		if !pc.ix.safe(c) {
			continue
		}
		if pc.est.calibrated(acc) > chunkCap {
			if last > start {
				return last
			}
			return c
		}
		last = c
	}
	return end
}
