package loop

import (
	"errors"
	"fmt"
	"maps"
	"time"
)

// body runs from RunStarted to RunCompleted.
func (ru *run) body() (*RunResult, error) {
	var startInput []Entry
	if !ru.resumed {
		startInput = ru.input
	}
	if err := ru.emit(&RunStarted{Input: startInput, FromCheckpoint: ru.resumed}); err != nil {
		return nil, err
	}
	if !ru.resumed {
		if err := ru.inputGuardrails(); err != nil {
			return nil, err
		}
	} else if err := ru.resumeDrain(); err != nil {
		return nil, err
	}
	if ru.resumed {
		// A stored run that ends with a final answer (the process died after
		// the answer was checkpointed, or a guardrail failed it) is finalized
		// again rather than asking the model for a new turn (a deliberate
		// departure from lovia, whose resume always calls the model).
		if final := ru.trailingFinal(); final != nil {
			out, err := ru.finalOutput(&modelTurn{entries: final})
			var ove *OutputValidationError
			switch {
			case errors.As(err, &ove):
				if err := ru.repair(ove); err != nil {
					return nil, err
				}
				if err := ru.save(); err != nil {
					return nil, err
				}
			case err != nil:
				return nil, err
			default:
				return ru.finalize(out)
			}
		}
	}
	var output any
	for {
		out, done, err := ru.turn()
		if err != nil {
			return nil, err
		}
		if done {
			output = out
			break
		}
	}
	return ru.finalize(output)
}

func (ru *run) inputGuardrails() error {
	all := ru.rc.Entries()
	for _, g := range ru.act.inGuards {
		v, err := g(ru.ctx, ru.rc, all)
		if err != nil {
			return &GuardrailTripped{Stage: "input", Message: err.Error()}
		}
		if v != "" {
			return &GuardrailTripped{Stage: "input", Message: v}
		}
	}
	return nil
}

// resumeDrain executes the calls a crashed run left without results.
func (ru *run) resumeDrain() error {
	pending := PendingToolCalls(ru.transcript()[ru.runStart:])
	if len(pending) == 0 {
		return nil
	}
	ru.rc.setTurn(ru.turns)
	ru.turnOpen, ru.turnDurable = true, true
	if err := ru.emit(&TurnStarted{TurnNo: ru.turns}); err != nil {
		return err
	}
	if err := ru.toolPhase(pending, ""); err != nil {
		return err
	}
	if err := ru.emit(&TurnEnded{TurnNo: ru.turns}); err != nil {
		return err
	}
	if ru.pendingHandoff != nil {
		if err := ru.applyHandoff(); err != nil {
			return err
		}
	}
	ru.turnOpen = false
	return ru.save()
}

// checkLimits runs at each turn start.
func (ru *run) checkLimits() error {
	if ru.turns >= ru.opts.maxTurns {
		return &MaxTurnsExceeded{MaxTurns: ru.opts.maxTurns}
	}
	if err := ru.cancel.Err(); err != nil {
		return err
	}
	return ru.checkBudget()
}

func (ru *run) checkBudget() error {
	b := ru.opts.budget
	if b == nil {
		return nil
	}
	u := ru.rc.Usage()
	switch {
	case b.MaxInputTokens > 0 && u.InputTokens > b.MaxInputTokens:
		return &BudgetExceeded{Message: fmt.Sprintf("input tokens %d exceeds budget %d", u.InputTokens, b.MaxInputTokens)}
	case b.MaxOutputTokens > 0 && u.OutputTokens > b.MaxOutputTokens:
		return &BudgetExceeded{Message: fmt.Sprintf("output tokens %d exceeds budget %d", u.OutputTokens, b.MaxOutputTokens)}
	case b.MaxTotalTokens > 0 && u.InputTokens+u.OutputTokens > b.MaxTotalTokens:
		return &BudgetExceeded{Message: fmt.Sprintf("total tokens %d exceeds budget %d", u.InputTokens+u.OutputTokens, b.MaxTotalTokens)}
	case b.MaxToolCalls > 0 && ru.toolCalls > b.MaxToolCalls:
		return &BudgetExceeded{Message: fmt.Sprintf("tool call count %d exceeds budget %d", ru.toolCalls, b.MaxToolCalls)}
	}
	if b.MaxDuration > 0 {
		now := ru.r.now()
		if ru.budgetStart.IsZero() {
			ru.budgetStart = now
		} else if el := now.Sub(ru.budgetStart); el > b.MaxDuration {
			return &BudgetExceeded{Message: fmt.Sprintf("run time %s exceeds budget %s", el.Round(time.Millisecond), b.MaxDuration)}
		}
	}
	return nil
}

// turn runs one loop turn. done reports a final output.
func (ru *run) turn() (output any, done bool, err error) {
	if err := ru.checkLimits(); err != nil {
		return nil, false, err
	}
	ru.turns++
	ru.rc.setTurn(ru.turns)
	if ru.tracing() {
		// The turn's span parents its model and tool calls: the run's
		// context is the turn's until the turn ends.
		runCtx := ru.ctx
		var span Span
		ru.ctx, span = ru.tracer.Start(runCtx, "turn", Attr{"turn", ru.turns})
		defer func() { ru.ctx = runCtx; span.End(err) }()
	}
	ru.turnOpen, ru.turnDurable = true, false
	if err := ru.emit(&TurnStarted{TurnNo: ru.turns}); err != nil {
		return nil, false, err
	}
	if err := ru.drainMailbox(); err != nil {
		return nil, false, err
	}
	ru.turnDurable = false
	mt, err := ru.modelPhase()
	if err != nil {
		return nil, false, err
	}
	ru.rc.AddUsage(mt.usage)
	if mt.usage.InputTokens > 0 {
		ru.lastInputTokens = mt.usage.InputTokens
	}
	if err := ru.checkBudget(); err != nil {
		return nil, false, err
	}
	if mt.finish != "" {
		f := mt.finish
		ru.finish = &f
	} else {
		ru.finish = nil
	}
	ru.appendEntries(mt.entries...)
	ru.turnDurable = true
	if err := ru.emit(&MessageCompleted{Entries: mt.entries}); err != nil {
		return nil, false, err
	}
	calls := mt.entries
	for len(calls) > 0 && calls[0].Kind != KindToolCall {
		calls = calls[1:] // reasoning and text come first, then the calls
	}
	// A final message (no tool call) is stored with the run's completion,
	// in one write, when no output guardrail (a model call of its own,
	// perhaps) comes between them. A crash before that write calls the
	// model again on resume, as a crash during the model call does.
	final := len(calls) == 0 && len(ru.act.outGuards) == 0
	if !final {
		if err := ru.save(); err != nil {
			return nil, false, err
		}
	}
	if len(calls) > 0 {
		if err := ru.toolPhase(calls, mt.finish); err != nil {
			return nil, false, err
		}
	} else {
		out, err := ru.finalOutput(mt)
		var ove *OutputValidationError
		switch {
		case errors.As(err, &ove):
			if err := ru.repair(ove); err != nil {
				return nil, false, err
			}
		case err != nil:
			return nil, false, err
		default:
			output, done = out, true
		}
	}
	if err := ru.emit(&TurnEnded{TurnNo: ru.turns}); err != nil {
		return nil, false, err
	}
	if ru.pendingHandoff != nil {
		if err := ru.applyHandoff(); err != nil {
			return nil, false, err
		}
	}
	ru.turnOpen = false
	if done && final {
		return output, done, nil // finalize's completion stores the message
	}
	if err := ru.save(); err != nil {
		return nil, false, err
	}
	return output, done, nil
}

func (ru *run) drainMailbox() error {
	if pk, ok := ru.rc.Mailbox.(MailboxPeeker); ok {
		return ru.drainDurable(pk)
	}
	msgs, err := ru.rc.Mailbox.Drain(ru.parent)
	if err != nil {
		return fmt.Errorf("mailbox drain: %w", err)
	}
	if len(msgs) == 0 {
		return nil
	}
	for _, m := range msgs {
		e := Entry{Kind: KindInput, Role: RoleUser, Content: m.Content, Parts: m.Parts, ID: m.Token}
		ru.appendEntries(e)
		if err := ru.emit(&UserMessageInjected{Content: m.Content, Parts: m.Parts, TurnNo: ru.turns}); err != nil {
			return err
		}
	}
	return ru.save()
}

// drainDurable applies queued messages exactly once: peek, skip what the
// transcript already holds (a crash after the save, before the ack),
// append, emit, save, then ack.
func (ru *run) drainDurable(pk MailboxPeeker) error {
	msgs, err := pk.Peek(ru.parent)
	if err != nil {
		return fmt.Errorf("mailbox peek: %w", err)
	}
	if len(msgs) == 0 {
		return nil
	}
	held := map[string]bool{}
	for _, e := range ru.transcript()[ru.runStart:] {
		if e.Kind == KindInput && e.ID != "" {
			held[e.ID] = true
		}
	}
	tokens := make([]string, 0, len(msgs))
	added := false
	for _, m := range msgs {
		tokens = append(tokens, m.Token)
		if m.Token != "" && held[m.Token] {
			continue
		}
		ru.appendEntries(Entry{Kind: KindInput, Role: RoleUser, Content: m.Content, Parts: m.Parts, ID: m.Token})
		added = true
		if err := ru.emit(&UserMessageInjected{Content: m.Content, Parts: m.Parts, TurnNo: ru.turns}); err != nil {
			return err
		}
	}
	if added {
		if err := ru.save(); err != nil {
			return err
		}
	}
	if err := pk.Ack(ru.parent, tokens); err != nil {
		// The messages are checkpointed; a later drain recognizes them.
		ru.log.Warn("mailbox ack failed; the messages stay queued and will be skipped as already applied", "error", err)
	}
	return nil
}

// finalOutput turns a final (tool-call-free) model turn into the output.
func (ru *run) finalOutput(mt *modelTurn) (any, error) {
	text := mt.text()
	spec := ru.act.output
	if spec == nil {
		if text == "" {
			ru.log.Warn("model returned an empty final message", "turn", ru.turns)
		}
		return text, nil
	}
	return spec.parse(text)
}

// finalize runs output guardrails, completes the checkpoint, appends the
// session segment and emits RunCompleted.
func (ru *run) finalize(output any) (*RunResult, error) {
	for _, g := range ru.act.outGuards {
		v, err := g(ru.ctx, ru.rc, output)
		if err != nil {
			return nil, &GuardrailTripped{Stage: "output", Message: err.Error()}
		}
		if v != "" {
			return nil, &GuardrailTripped{Stage: "output", Message: v}
		}
	}
	entries := ru.runEntries()
	res := &RunResult{
		Output: output, Entries: entries, FinalAgent: ru.agent.Name, Usage: ru.rc.Usage(),
		Turns: ru.turns, FinishReason: ru.finish, LastInputTokens: ru.lastInputTokens, RunID: ru.opts.runID,
	}
	ru.foldUsage()
	if err := ru.complete(output); err != nil {
		return nil, err
	}
	if s := ru.opts.session; s != nil && len(entries) > 0 {
		var meta map[string]any
		if len(ru.contextState) > 0 {
			meta = map[string]any{"context_state": maps.Clone(ru.contextState)}
		}
		if ru.lastNotice != nil {
			if meta == nil {
				meta = map[string]any{}
			}
			meta["context_notice"] = noticeMap(ru.lastNotice)
		}
		if _, err := s.Append(ru.parent, ru.opts.sessionID, Segment{RunID: ru.opts.runID, Entries: entries, Meta: meta}); err != nil {
			return nil, fmt.Errorf("session append %s: %w", ru.opts.sessionID, err)
		}
	}
	ev := &RunCompleted{Output: output, Usage: res.Usage, Turns: res.Turns, FinishReason: res.FinishReason, FinalAgent: res.FinalAgent, Result: res}
	if err := ru.emit(ev); err != nil {
		return nil, err
	}
	return res, nil
}

func noticeMap(n *CompactionNotice) map[string]any {
	m := map[string]any{
		"reason": n.Reason, "reactive": n.Reactive, "tokens_before": n.TokensBefore,
		"tokens_after": n.TokensAfter, "detail": append([]string(nil), n.Detail...),
	}
	if n.Summary != nil {
		m["summary"] = *n.Summary
	} else {
		m["summary"] = nil
	}
	return m
}

// repair asks the agent's repair policy for a prompt after an invalid
// output and appends it, or returns the validation error.
func (ru *run) repair(ove *OutputValidationError) error {
	ru.repairs++
	policy := ru.agent.OutputRepair
	if policy == nil {
		policy = DefaultRepair
	}
	prompt, ok := policy.RepairPrompt(ru.repairs, ove)
	if !ok {
		return ove
	}
	ru.appendEntries(UserText(prompt))
	return nil
}

// trailingFinal returns the run's last model turn when the run entries end
// with one that requested no tools (a final answer), else nil.
func (ru *run) trailingFinal() []Entry {
	tr := ru.transcript()[ru.runStart:]
	i := len(tr)
	for i > 0 {
		k := tr[i-1].Kind
		if k != KindAssistantText && k != KindReasoning && k != KindToolCall {
			break
		}
		if k == KindToolCall {
			return nil
		}
		i--
	}
	if i == len(tr) {
		return nil
	}
	return tr[i:]
}
