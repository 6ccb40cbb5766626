package compaction

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Compaction is lovia's default context policy: when
// the view's estimate reaches the trigger, cheap-first stages record sticky
// decisions until it fits the target, and every call renders the view from
// the transcript and those decisions. It implements loop.ContextPolicy and
// loop.ContextPolicyTools (recall_tool_result).
//
// A Compaction holds configuration and a memo of the windows providers
// reported; every run's own state lives in its loop.CompactRequest.State.
// It is safe for concurrent use by any number of runs.
type Compaction struct {
	cfg    Config
	log    *slog.Logger
	disc   discoveries
	recall *loop.Tool
}

var (
	_ loop.ContextPolicy      = (*Compaction)(nil)
	_ loop.ContextPolicyTools = (*Compaction)(nil)
)

// New returns a policy for cfg; unset fields take their documented
// defaults. New panics when cfg is invalid (see [Config.Validate]): a
// wiring mistake.
func New(cfg Config) *Compaction {
	if err := cfg.Validate(); err != nil {
		panic(err.Error())
	}
	cfg = cfg.WithDefaults()
	cfg.Stages = append([]Stage(nil), cfg.Stages...)
	c := &Compaction{cfg: cfg, log: cfg.Logger}
	c.recall = newRecallTool(cfg.Store, c.log)
	return c
}

// Config returns the policy's configuration, defaults applied.
func (c *Compaction) Config() Config { return c.cfg }

// Tools implements loop.ContextPolicyTools: recall_tool_result, bound to
// the policy's store. The runner adds it after the agent's own tools and
// drops it silently when one of those has the same name.
func (c *Compaction) Tools() []*loop.Tool { return []*loop.Tool{c.recall} }

// Compact implements loop.ContextPolicy. It never
// modifies req.Entries; it replaces req.State[StateKey] with the updated
// sticky state. An error comes only from a stage (the built-in ones do
// not fail) and leaves the decisions made so far in the state.
func (c *Compaction) Compact(ctx context.Context, req *loop.CompactRequest) (*loop.CompactResult, error) {
	if req.State == nil {
		req.State = map[string]any{}
	}
	// 1–4: state, body, summary validation, pruning.
	st := loadState(req.State)
	h := leadingSystem(req.Entries)
	head, body := req.Entries[:h], req.Entries[h:]
	ix := indexBody(body)
	validateSummary(st, body, ix)
	st.cleared.keep(ix.unique)
	st.offloaded.keep(ix.unique)
	// 5–6: calibration and estimate.
	st.calibrate(req.LastInputTokens)
	key := windowKey(req)
	if req.Overflow {
		st.learn(key, req.ReportedWindow)
	}
	est := &estimator{image: c.cfg.ImageTokens, ratio: st.ratio, tools: req.Tools, toolsRaw: EstimateTools(req.Tools)}
	if te, ok := req.Provider.(loop.TokenEstimator); ok {
		est.provider = te
	}
	pc := &PlanContext{c: c, req: req, st: st, ix: ix, est: est, head: head, body: body, aggressive: req.Overflow}
	pc.rerender()
	start := pc.Tokens()
	before := start
	if sticky(st) {
		before = est.calibrated(est.view(req.Entries))
	}
	out := &outcome{pc: pc, start: start, before: before}
	// 7–9: window and budget.
	window := c.resolveWindow(ctx, req, st, key)
	pc.window = window
	if req.Overflow {
		if w := start + c.cfg.ReserveOutputTokens; window == 0 || w < window {
			window = w
		}
	} else if window == 0 {
		return out.result(), nil
	}
	pc.budget = c.budget(window, req.Overflow)
	out.budgeted = true
	if !req.Overflow && start < pc.budget.Trigger {
		return out.result(), nil
	}
	// 10–11: protected tail, stages.
	pc.protected = pc.protectedFrom()
	if pc.protected <= pc.r.covered {
		c.log.Warn("compaction: the protected tail covers the whole history; only an oversized result can shrink",
			"tokens", start, "target", pc.budget.Target, "tail_tokens", pc.budget.Tail)
	}
	var stageErr error
	for _, s := range c.cfg.Stages {
		if pc.Fits() {
			break
		}
		decided, err := s.Plan(ctx, pc)
		if decided {
			out.names = append(out.names, s.Name())
			pc.rerender()
		}
		if err != nil {
			stageErr = fmt.Errorf("compaction: stage %s: %w", s.Name(), err)
			break
		}
	}
	res := out.result()
	if stageErr != nil {
		return nil, stageErr
	}
	return res, nil
}

// outcome assembles the result and saves the state (steps 12–13).
type outcome struct {
	pc       *PlanContext
	start    int // calibrated estimate of the replayed view
	before   int // calibrated estimate of the transcript
	budgeted bool
	names    []string
}

func (o *outcome) result() *loop.CompactResult {
	pc := o.pc
	st := pc.st
	st.lastViewEstimate = pc.raw
	pc.req.State[StateKey] = st.encode()
	res := &loop.CompactResult{
		Entries: pc.req.Entries, TokensBefore: o.before, TokensAfter: pc.Tokens(),
		Estimate: pc.Tokens(), Summary: pc.newSummary,
	}
	if sticky(st) {
		res.Entries, res.Changed = pc.r.out, true
	}
	switch {
	case len(o.names) > 0:
		res.Compacted = true
		res.Reason = strings.Join(o.names, "+")
		if pc.aggressive {
			res.Reason = "reactive_" + res.Reason
		}
	case res.Changed:
		res.Reason = "sticky_replay"
	}
	if res.Reason != "" {
		res.Detail = o.detail()
	}
	return res
}

func (o *outcome) detail() []string {
	st := o.pc.st
	var d []string
	if o.budgeted && o.pc.budget.Usable > 0 {
		d = append(d, fmt.Sprintf("context was %d%% full", o.start*100/o.pc.budget.Usable))
	}
	if n := st.offloaded.len(); n > 0 {
		d = append(d, fmt.Sprintf("%d tool result(s) offloaded in total", n))
	}
	if n := st.cleared.len(); n > 0 {
		d = append(d, fmt.Sprintf("%d tool result(s) cleared in total", n))
	}
	if st.summary != nil {
		d = append(d, fmt.Sprintf("summary covers %d message(s)", st.summary.Covered))
	}
	return d
}

// sticky reports whether any decision shapes the view.
func sticky(st *state) bool {
	return st.summary != nil || st.cleared.len() > 0 || st.offloaded.len() > 0
}

// leadingSystem returns the length of the leading run of system entries.
func leadingSystem(entries []loop.Entry) int {
	n := 0
	for n < len(entries) && entries[n].Kind == loop.KindInput && entries[n].Role == loop.RoleSystem {
		n++
	}
	return n
}

// validateSummary drops a summary whose coverage is out of range or whose
// prefix changed structure, and rewinds one that would separate a call
// from its result.
func validateSummary(st *state, body []loop.Entry, ix *bodyIndex) {
	s := st.summary
	if s == nil {
		return
	}
	if s.Covered < 1 || s.Covered > len(body) || fingerprint(body[:s.Covered]) != s.Fingerprint {
		st.setSummary(nil)
		return
	}
	if ix.safe(s.Covered) {
		return
	}
	c := ix.rewind(s.Covered)
	if c == 0 {
		st.setSummary(nil)
		return
	}
	st.setSummary(&Summary{Text: s.Text, Covered: c, Fingerprint: fingerprint(body[:c])})
}

// protectedFrom computes the protected tail on the rendered body
// and returns its first body index.
func (pc *PlanContext) protectedFrom() int {
	lo, n := pc.r.covered, len(pc.body)
	if n <= lo {
		return n
	}
	budget := float64(pc.budget.Tail) / pc.est.ratio
	cut := n - 1 // the newest entry is always protected
	acc := pc.est.entry(pc.r.at(n - 1))
	for i := n - 2; i >= lo; i-- {
		acc += pc.est.entry(pc.r.at(i))
		if float64(acc) > budget {
			break
		}
		cut = i
	}
	// Pull the latest user message in when the tail stays within twice
	// the budget.
	for u := n - 1; u >= lo; u-- {
		e := pc.r.at(u)
		if e.Kind != loop.KindInput || e.Role != loop.RoleUser {
			continue
		}
		if u < cut {
			sum := 0
			for i := u; i < n; i++ {
				sum += pc.est.entry(pc.r.at(i))
			}
			if float64(sum) <= 2*budget {
				cut = u
			}
		}
		break
	}
	return max(pc.ix.rewind(cut), lo)
}

func newRecallTool(store ResultStore, log *slog.Logger) *loop.Tool {
	if store == nil {
		return RecallTool(nil)
	}
	return RecallTool(loggingStore{store, log})
}

// loggingStore logs Get errors (recall falls through to the transcript).
type loggingStore struct {
	ResultStore
	log *slog.Logger
}

func (s loggingStore) Get(ctx context.Context, key string) (string, bool, error) {
	out, ok, err := s.ResultStore.Get(ctx, key)
	if err != nil {
		s.log.Warn("compaction: result store get failed; reading the transcript", "ref", key, "error", err)
	}
	return out, ok, err
}
