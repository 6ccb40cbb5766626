package loop

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// modelTurn is one assembled assistant turn.
type modelTurn struct {
	entries []Entry
	usage   Usage
	finish  string
}

func (m *modelTurn) text() string {
	var n int
	var only string
	for i := range m.entries {
		if m.entries[i].Kind == KindAssistantText {
			n++
			only = m.entries[i].Text
		}
	}
	if n <= 1 {
		return only
	}
	var b strings.Builder
	for i := range m.entries {
		if m.entries[i].Kind == KindAssistantText {
			b.WriteString(m.entries[i].Text)
		}
	}
	return b.String()
}

// assembler builds a turn from provider deltas.
type assembler struct {
	ru        *run
	text      strings.Builder
	reasoning strings.Builder
	slots     []callSlot
	completed []Entry
	hasText   bool // completed entries of each kind
	hasReason bool
	hasCalls  bool
	usage     Usage
	finish    string
	streamed  bool // text or reasoning deltas were emitted
	any       bool // any delta at all
}

type callSlot struct {
	index  int
	id     string
	name   string
	args   strings.Builder
	filled bool
}

func (a *assembler) reset() {
	a.text.Reset()
	a.reasoning.Reset()
	a.slots = a.slots[:0]
	a.completed = a.completed[:0]
	a.hasText, a.hasReason, a.hasCalls = false, false, false
	a.usage = Usage{}
	a.finish = ""
	a.streamed, a.any = false, false
}

func (a *assembler) onDelta(d Delta) error {
	a.any = true
	switch d.Kind {
	case DeltaText:
		if d.Text == "" {
			return nil
		}
		a.text.WriteString(d.Text)
		a.streamed = true
		return a.ru.emit(&TextDelta{Delta: d.Text})
	case DeltaReasoning:
		if d.Text == "" {
			return nil
		}
		a.reasoning.WriteString(d.Text)
		a.streamed = true
		return a.ru.emit(&ReasoningDelta{Delta: d.Text})
	case DeltaToolCall:
		s := a.slot(d.Index)
		if d.CallID != "" {
			s.id = d.CallID
		}
		if d.Name != "" {
			s.name = d.Name
		}
		s.args.WriteString(d.Arguments)
	case DeltaUsage:
		a.usage = d.Usage
	case DeltaFinish:
		a.finish = d.Finish
	case DeltaEntry:
		if d.Entry == nil {
			return nil
		}
		e := *d.Entry
		switch e.Kind {
		case KindAssistantText:
			a.hasText = true
		case KindReasoning:
			a.hasReason = true
		case KindToolCall:
			a.hasCalls = true
		default:
			return fmt.Errorf("provider sent a completed %q entry; only assistant entries are allowed", e.Kind)
		}
		a.completed = append(a.completed, e)
	}
	return nil
}

func (a *assembler) slot(index int) *callSlot {
	for i := range a.slots {
		if a.slots[i].index == index {
			return &a.slots[i]
		}
	}
	a.slots = append(a.slots, callSlot{index: index, filled: true})
	return &a.slots[len(a.slots)-1]
}

// build returns the turn's entries: reasoning, text, tool calls.
func (a *assembler) build() *modelTurn {
	mt := &modelTurn{usage: a.usage, finish: a.finish}
	n := len(a.completed) + len(a.slots) + 2
	out := make([]Entry, 0, n)
	if a.hasReason {
		for _, e := range a.completed {
			if e.Kind == KindReasoning {
				out = append(out, e)
			}
		}
	} else if a.reasoning.Len() > 0 {
		out = append(out, Entry{Kind: KindReasoning, Text: a.reasoning.String(), Provider: a.ru.act.info.Name})
	}
	if a.hasText {
		for _, e := range a.completed {
			if e.Kind == KindAssistantText {
				out = append(out, e)
			}
		}
	} else if a.text.Len() > 0 {
		out = append(out, Entry{Kind: KindAssistantText, Text: a.text.String()})
	}
	if a.hasCalls {
		for _, e := range a.completed {
			if e.Kind == KindToolCall {
				out = append(out, e)
			}
		}
	} else if len(a.slots) > 0 {
		if len(a.slots) > 1 {
			sort.SliceStable(a.slots, func(i, j int) bool { return a.slots[i].index < a.slots[j].index })
		}
		for i := range a.slots {
			s := &a.slots[i]
			args := s.args.String()
			if args == "" {
				args = "{}"
			}
			id := s.id
			if id == "" {
				id = fmt.Sprintf("call_%d_%s", s.index, s.name)
			}
			out = append(out, Entry{Kind: KindToolCall, CallID: id, Name: s.name, Arguments: args})
		}
	}
	mt.entries = out
	return mt
}

// modelPhase compacts the view, streams the provider with retries and the
// reactive overflow path, and returns the assembled turn.
func (ru *run) modelPhase() (*modelTurn, error) {
	view, est, err := ru.compactView(false, 0)
	if err != nil {
		return nil, err
	}
	// The request and the assembler are reused turn after turn (a provider
	// must not retain the request after Stream returns).
	if ru.req == nil {
		ru.req = &ModelRequest{}
		ru.asm = &assembler{ru: ru}
		ru.onDelta = ru.asm.onDelta
	}
	req := ru.req
	*req = ModelRequest{Tools: ru.act.schemas, Settings: ru.agent.Settings}
	if len(req.Tools) == 0 {
		req.Tools = nil
	}
	if ru.act.native {
		spec := ru.act.output
		req.ResponseFormat = &ResponseFormat{Name: spec.name(), Schema: spec.Schema, Strict: spec.Strict}
	}
	req.Entries = ru.injectView(view)
	asm := ru.asm
	asm.reset()
	reactiveTried := false
	var span Span = noopSpan{}
	if ru.tracing() {
		span = ru.startSpan("model_call", Attr{"agent", ru.agent.Name}, Attr{"model", ru.act.info.Model})
	}
	for attempt := 1; ; attempt++ {
		err := ru.act.provider.Stream(ru.ctx, req, ru.onDelta)
		if err == nil {
			break
		}
		if errors.Is(err, errAbandon) || ru.abandoned {
			span.End(errAbandon)
			return nil, errAbandon
		}
		if ce := ru.cancel.Err(); ce != nil {
			span.End(ce)
			return nil, ce
		}
		if ru.parent.Err() != nil {
			span.End(err)
			return nil, err
		}
		var overflow *ContextOverflowError
		if errors.As(err, &overflow) && !asm.any && !reactiveTried {
			reactiveTried = true
			nview, nest, cerr := ru.compactView(true, overflow.ReportedWindow)
			if cerr == nil && nview != nil && (est == 0 || nest == 0 || float64(nest) < 0.95*float64(est)) {
				if err := ru.emitCompacted(len(ru.transcript()), len(nview)); err != nil {
					span.End(err)
					return nil, err
				}
				req.Entries = ru.injectView(nview)
				asm.reset()
				attempt--
				continue
			}
			if cerr != nil {
				ru.log.Warn("reactive compaction failed", "error", cerr)
			}
		}
		if !ru.retry.retryable(err) || attempt >= ru.retry.attempts() {
			span.End(err)
			return nil, err
		}
		if asm.any && ru.retry.NoRestartOnPartial {
			span.End(err)
			return nil, err
		}
		if err := ru.retry.sleep(ru.ctx, ru.retry.delay(attempt, err)); err != nil {
			if ce := ru.cancel.Err(); ce != nil {
				err = ce
			}
			span.End(err)
			return nil, err
		}
		if ce := ru.cancel.Err(); ce != nil {
			span.End(ce)
			return nil, ce
		}
		if asm.any {
			streamed := asm.streamed
			asm.reset()
			if streamed {
				if err := ru.emit(&OutputDiscarded{}); err != nil {
					return nil, err
				}
			}
		}
	}
	span.End(nil)
	return asm.build(), nil
}

// compactView asks the context policy for the view. It returns nil when the
// view is the transcript unchanged (proactive) or, on the reactive path,
// when nothing new was decided.
func (ru *run) compactView(overflow bool, window int) ([]Entry, int, error) {
	tr := ru.transcript()
	tr = tr[:len(tr):len(tr)]
	if ru.policy == nil {
		if overflow {
			return nil, 0, nil
		}
		return tr, 0, nil
	}
	req := &CompactRequest{
		Entries: tr, Provider: ru.act.provider, Model: ru.act.info.Model, Tools: ru.act.schemas,
		LastInputTokens: ru.lastInputTokens, Overflow: overflow, ReportedWindow: window, State: ru.contextState,
		AddUsage: ru.rc.AddUsage,
	}
	if overflow {
		req.LastInputTokens = 0
	}
	res, err := ru.policy.Compact(ru.ctx, req)
	if err != nil {
		return nil, 0, fmt.Errorf("context policy: %w", err)
	}
	if overflow && !res.Compacted {
		return nil, 0, nil
	}
	view := tr
	if res.Changed {
		view = res.Entries
		// Keep the transcript's leading system entries when the policy
		// dropped them (never re-rendered).
		if ru.headLen > 0 && (len(view) == 0 || view[0].Kind != KindInput || view[0].Role != RoleSystem) {
			v := make([]Entry, 0, len(view)+ru.headLen)
			v = append(v, tr[:ru.headLen]...)
			view = append(v, view...)
		}
	}
	if res.Compacted {
		n := CompactionNotice{
			Reason: res.Reason, Reactive: overflow, Summary: res.Summary,
			TokensBefore: res.TokensBefore, TokensAfter: res.TokensAfter, Detail: res.Detail,
		}
		if n.Reason == "" {
			n.Reason = "context_policy"
		}
		ru.pendingNotice = &n
		if !overflow {
			if err := ru.emitCompacted(len(tr), len(view)); err != nil {
				return nil, 0, err
			}
		}
	}
	return view, res.Estimate, nil
}

// emitCompacted emits the pending compaction notice (the reactive one only
// when the runner retries with the compacted view).
func (ru *run) emitCompacted(before, after int) error {
	n := ru.pendingNotice
	if n == nil {
		return nil
	}
	ru.pendingNotice = nil
	ru.lastNotice = n
	return ru.emit(&ContextCompacted{Notice: *n, EntriesBefore: before, EntriesAfter: after})
}

// injectView appends plugin view injectors' entries to this call's view.
func (ru *run) injectView(view []Entry) []Entry {
	if len(ru.act.injectors) == 0 {
		return view
	}
	var extra []Entry
	for _, inj := range ru.act.injectors {
		func() {
			defer func() {
				if p := recover(); p != nil {
					ru.log.Warn("view injector panicked; skipped", "panic", p)
				}
			}()
			extra = append(extra, inj.InjectView(ru.ctx, ru.rc)...)
		}()
	}
	if len(extra) == 0 {
		return view
	}
	out := make([]Entry, 0, len(view)+len(extra))
	out = append(out, view...)
	return append(out, extra...)
}
