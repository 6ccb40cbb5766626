package loop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// errAbandon signals that the stream consumer stopped iterating.
var errAbandon = errors.New("loop: stream abandoned")

// run is the state of one execution. It is used by one goroutine (the
// stream's); parallel tool tasks talk to it through channels.
type run struct {
	r         *Runner
	parent    context.Context // caller's context: task cancellation
	ctx       context.Context // parent + cancel token: given to providers and tools
	stopCtx   context.CancelCauseFunc
	opts      runOptions
	entry     *Agent
	input     []Entry
	approvals *Approvals
	cancel    *CancelToken
	log       *slog.Logger
	tracer    Tracer

	yield     func(Event) bool
	abandoned bool

	agent *Agent
	acts  map[*Agent]*activation
	act   *activation
	rc    *RunContext

	runStart int // index of this run's first entry in the transcript
	headLen  int // length of the runner-rendered system head
	stored   int // run entries already checkpointed
	rev      uint64
	// saved is the head of the last checkpoint write, if wrote: a save
	// that would store no entry and the same head writes nothing.
	saved   RunHead
	wrote   bool
	resumed bool

	retry  *RetryPolicy
	policy ContextPolicy

	turns           int
	turnOpen        bool
	turnDurable     bool
	lastInputTokens int64
	finish          *string
	contextState    map[string]any
	lastNotice      *CompactionNotice
	pendingNotice   *CompactionNotice
	pendingHandoff  *handoffSignal
	repairs         int
	toolCalls       int
	budgetStart     time.Time
	completed       bool
	folded          bool
	closers         []func(context.Context) error
	req             *ModelRequest
	asm             *assembler
	onDelta         func(Delta) error
}

func newRun(ctx context.Context, r *Runner, agent *Agent, input []Entry, o runOptions, ap *Approvals) *run {
	cancel := o.cancel
	if cancel == nil {
		cancel = NewCancelToken()
	}
	mb := o.mailbox
	if mb == nil {
		mb = NewMemoryMailbox()
	}
	tracer := o.tracer
	if tracer == nil {
		tracer = r.tracer
	}
	ru := &run{
		r: r, parent: ctx, opts: o, entry: agent, input: input, approvals: ap,
		cancel: cancel, tracer: tracer, agent: agent,
		log: r.logger.With("run_id", o.runID),
	}
	ru.rc = &RunContext{
		Deps: o.deps, RunID: o.runID, SessionID: o.sessionID, Metadata: o.metadata,
		Budget: o.budget, Mailbox: mb, CancelToken: cancel, runner: r, tracer: tracer,
	}
	ru.retry = o.retry
	if ru.retry == nil {
		ru.retry = agent.Retry
	}
	if ru.retry == nil {
		ru.retry = &defaultRetry
	}
	ru.policy = o.contextPolicy
	if ru.policy == nil {
		ru.policy = agent.ContextPolicy
	}
	if ru.policy == nil {
		ru.policy = r.policy
	}
	return ru
}

// execute runs the whole stream. It returns the result, or the run's error.
func (ru *run) execute(yield func(Event) bool) (*RunResult, error) {
	ru.yield = yield
	// The run's span is the parent of every span the run opens: its
	// context is the run's.
	parent := ru.parent
	var span Span = noopSpan{}
	if ru.tracing() {
		parent, span = ru.tracer.Start(ru.parent, "run", Attr{"agent", ru.entry.Name}, Attr{"run_id", ru.opts.runID})
	}
	ctx, stop := context.WithCancelCause(parent)
	ru.ctx, ru.stopCtx = ctx, stop
	ru.cancel.onCancel(func(reason string) { stop(&RunCancelled{Reason: reason}) })
	defer stop(nil)
	res, err := ru.executeInner()
	ru.teardown()
	span.End(err)
	return res, err
}

func (ru *run) executeInner() (*RunResult, error) {
	snap, err := ru.resolveResume()
	if err != nil {
		return nil, err
	}
	if snap != nil && snap.Status == StatusCompleted {
		return ru.replay(snap)
	}
	if snap == nil && len(ru.input) == 0 {
		// A fresh run on nothing would pay for a model call on no
		// question: only a run with a checkpoint resumes without input.
		return nil, &UserError{
			Message: "the run has no input, and no checkpoint to resume",
			Hint:    "give the run an input (a string, or a list of {role, content}); only the resubmission of an existing run may omit it",
		}
	}
	if err := ru.bootstrap(snap); err != nil {
		return nil, err
	}
	res, err := ru.body()
	if err != nil {
		return nil, ru.fail(err)
	}
	return res, nil
}

func (ru *run) teardown() {
	ctx := context.WithoutCancel(ru.parent)
	for i := len(ru.closers) - 1; i >= 0; i-- {
		if err := ru.closers[i](ctx); err != nil {
			ru.log.Warn("run teardown: close failed", "error", err)
		}
	}
	ru.closers = nil
}

// emit dispatches ev to hooks, then to the consumer.
func (ru *run) emit(ev Event) error {
	if ru.abandoned {
		return errAbandon
	}
	h := ev.Header()
	h.Agent = ru.agent.Name
	h.Turn = ru.turns
	if ru.act != nil {
		ru.act.dispatch(ru.ctx, ru.rc, ev, ru.log)
	}
	ru.opts.hooks.dispatch(ru.ctx, ru.rc, ev, ru.log)
	if !ru.yield(ev) {
		ru.abandoned = true
		return errAbandon
	}
	return nil
}

// emitRaw sends ev to the consumer only (replay events bypass hooks).
func (ru *run) emitRaw(ev Event) error {
	h := ev.Header()
	h.Agent = ru.agent.Name
	h.Turn = ru.turns
	if !ru.yield(ev) {
		ru.abandoned = true
		return errAbandon
	}
	return nil
}

// resolveResume applies if_run_exists. It returns the snapshot to resume or
// replay, or nil for a fresh run.
func (ru *run) resolveResume() (*Snapshot, error) {
	o := &ru.opts
	if o.checkpointer == nil && o.resumeFrom == nil {
		return nil, nil
	}
	var snap *Snapshot
	if o.resumeFrom != nil {
		snap = o.resumeFrom
	} else {
		if o.ifRunExists == RestartRun {
			if err := o.checkpointer.Delete(ru.parent, o.runID); err != nil {
				return nil, fmt.Errorf("checkpoint delete %s: %w", o.runID, err)
			}
			return nil, nil
		}
		s, err := o.checkpointer.Load(ru.parent, o.runID)
		switch {
		case errors.Is(err, ErrNoSnapshot):
		case err != nil:
			return nil, fmt.Errorf("checkpoint load %s: %w", o.runID, err)
		default:
			snap = s
		}
	}
	switch o.ifRunExists {
	case FailRun:
		if snap != nil {
			return nil, &UserError{
				Message: fmt.Sprintf("A run already exists for run_id=%s (status=%s)", o.runID, snap.Status),
				Hint:    "use if_run_exists resume to continue it, or restart to discard it",
			}
		}
	case ResumeOnly:
		if snap == nil {
			return nil, &UserError{
				Message: fmt.Sprintf("No snapshot found for run_id=%s", o.runID),
				Hint:    "check the run id, or use if_run_exists resume to start a fresh run",
			}
		}
	case RestartRun:
		if snap != nil && o.checkpointer != nil {
			if err := o.checkpointer.Delete(ru.parent, o.runID); err != nil {
				return nil, fmt.Errorf("checkpoint delete %s: %w", o.runID, err)
			}
			return nil, nil
		}
	}
	if snap != nil {
		ru.rev = snap.Revision
	}
	return snap, nil
}

// resolveAgent finds the agent named name in the entry agent's handoff
// graph (breadth first, first reached per name wins).
func resolveAgent(entry *Agent, name string) *Agent {
	seen := map[*Agent]bool{}
	queue := []*Agent{entry}
	for len(queue) > 0 {
		a := queue[0]
		queue = queue[1:]
		if a == nil || seen[a] {
			continue
		}
		seen[a] = true
		if a.Name == name {
			return a
		}
		for _, h := range a.Handoffs {
			queue = append(queue, h.Agent)
		}
	}
	return nil
}

// replay answers a completed run from its snapshot: no model call, no
// hooks; events RunStarted(entry agent) and RunCompleted.
func (ru *run) replay(snap *Snapshot) (*RunResult, error) {
	if snap.Error != nil && snap.Error.Type == "OutputNotSerializable" {
		return nil, &UserError{
			Message: fmt.Sprintf("the completed run %s has an output that is not JSON-safe and cannot be replayed", snap.RunID),
			Hint:    "rerun it with if_run_exists restart, or use delete on success for such outputs",
		}
	}
	final := resolveAgent(ru.entry, snap.Agent)
	if final == nil {
		ru.log.Warn("replay: stored agent not reachable from the entry agent; attributing to the entry agent", "agent", snap.Agent)
		final = ru.entry
	}
	entries := NormalizeAnsweredCalls(snap.Entries)
	out := snap.Output
	if out == nil {
		out = ""
	}
	if spec := ru.outputSpecFor(final); spec != nil && spec.Decode != nil {
		if raw, err := jsonRaw(out); err == nil {
			if v, err := spec.Decode(raw); err == nil {
				out = v
			}
		}
	}
	res := &RunResult{
		Output: out, Entries: entries, FinalAgent: final.Name, Usage: snap.Usage,
		Turns: snap.Turns, LastInputTokens: snap.LastInputTokens, RunID: snap.RunID, Replayed: true,
	}
	ru.turns = 0
	if err := ru.emitRaw(&RunStarted{FromCheckpoint: true}); err != nil {
		return nil, ErrAbandoned
	}
	if ru.opts.parent != nil {
		ru.opts.parent.AddUsage(snap.Usage)
	}
	if err := ru.replaySideEffects(snap, entries); err != nil {
		if errors.Is(err, ErrUnavailable) {
			ru.log.Warn("replay interrupted: a store is unavailable; stopping without a terminal event", "error", err)
			return nil, err
		}
		_ = ru.emitRaw(&RunFailed{Error: Describe(err), Err: err})
		return nil, err
	}
	ru.agent = final
	ev := &RunCompleted{Output: out, Usage: res.Usage, Turns: res.Turns, FinalAgent: final.Name, Result: res}
	ru.agent = ru.entry
	if err := ru.emitRaw(ev); err != nil {
		return nil, ErrAbandoned
	}
	return res, nil
}

func (ru *run) replaySideEffects(snap *Snapshot, entries []Entry) error {
	o := &ru.opts
	if o.session != nil && len(entries) > 0 {
		var meta map[string]any
		if len(snap.ContextState) > 0 {
			meta = map[string]any{"context_state": snap.ContextState}
		}
		if _, err := o.session.Append(ru.parent, o.sessionID, Segment{RunID: snap.RunID, Entries: entries, Meta: meta}); err != nil {
			return fmt.Errorf("session append %s: %w", o.sessionID, err)
		}
	}
	if o.deleteOnSuccess && o.checkpointer != nil {
		if err := o.checkpointer.Delete(ru.parent, snap.RunID); err != nil {
			return fmt.Errorf("checkpoint delete %s: %w", snap.RunID, err)
		}
	}
	return nil
}

// fail handles an error raised after RunStarted: terminal snapshot, usage
// folding, and RunFailed (except for abandonment, fencing, an unavailable
// store and task cancellation).
func (ru *run) fail(err error) error {
	if errors.Is(err, errAbandon) || ru.abandoned {
		return ErrAbandoned
	}
	if errors.Is(err, ErrFenced) {
		ru.log.Warn("run stopped: checkpoint fenced by another writer", "error", err)
		return err
	}
	if errors.Is(err, ErrUnavailable) && ru.parent.Err() == nil && ru.cancel.Err() == nil {
		// A broker outage is not the run's fault: no terminal event, and no
		// terminal checkpoint (the store is the thing that is down); the last
		// checkpoint stays "running" for whoever resumes the run.
		ru.log.Warn("run interrupted: a store it depends on is unavailable; stopping without a terminal event", "error", err)
		ru.foldUsage()
		return err
	}
	taskCancelled := ru.parent.Err() != nil && ru.cancel.Err() == nil
	if taskCancelled {
		err = context.Cause(ru.parent)
	} else if errors.Is(err, context.Canceled) && ru.cancel.Err() != nil {
		err = ru.cancel.Err()
	}
	if !ru.completed {
		if ru.turnOpen && !ru.turnDurable && ru.turns > 0 {
			ru.turns--
		}
		status := StatusFailed
		if interruptedStatus(err) {
			status = StatusInterrupted
		}
		info := Describe(err)
		if serr := ru.saveTerminal(status, &info); serr != nil {
			if errors.Is(serr, ErrFenced) {
				return serr
			}
			ru.log.Warn("terminal checkpoint failed", "error", serr)
		}
	}
	ru.foldUsage()
	if taskCancelled {
		return err
	}
	_ = ru.emit(&RunFailed{Error: Describe(err), Err: err})
	return err
}

// foldUsage adds this run's usage to the parent run's, once.
func (ru *run) foldUsage() {
	if ru.opts.parent != nil && !ru.folded {
		ru.folded = true
		ru.opts.parent.AddUsage(ru.rc.Usage())
	}
}
