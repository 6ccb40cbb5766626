package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"
)

// readyCall is a call that passed preflight, with its execution settings
// resolved on the run goroutine.
type readyCall struct {
	call     Entry
	tool     *Tool
	args     json.RawMessage
	retries  int
	timeout  time.Duration
	limit    int
	renderer Renderer
	// approval is the reason given with the call's approval (ApprovalFrom).
	approval string
}

// taskItem is what a tool task hands to the run goroutine.
type taskItem struct {
	ev      Event
	result  Entry
	tcc     *ToolCallCompleted
	handoff *handoffSignal
	abort   error // the tool raised RunCancelled: the run ends
	done    bool
}

// toolPhase runs one turn's calls.
func (ru *run) toolPhase(calls []Entry, finish string) (err error) {
	if len(calls) == 1 {
		// One call: nothing to overlap, run it on this goroutine.
		rc, err := ru.preflight(calls[0], finish)
		if err != nil || rc == nil {
			return err
		}
		barrier := rc.tool.Sequential || rc.tool.handoff != nil
		var ierr error
		ru.execCall(ru.ctx, rc, func(it taskItem) {
			if ierr == nil {
				ierr = ru.surface(it, !barrier)
			}
		})
		if ierr == nil {
			ierr = ru.stopped()
		}
		return ierr
	}
	defer func() {
		if err == nil {
			err = ru.stopped()
		}
	}()
	ch := make(chan taskItem, 2*len(calls)+2)
	inflight := 0
	batchCtx, cancelBatch := context.WithCancel(ru.ctx)
	defer func() {
		cancelBatch()
		// A cancelled batch still keeps the results of calls that finished
		// (the call that tripped the token, say): tasks run truly in
		// parallel here, so a sibling's observed cancellation or the next
		// preflight can see the tripped token before such a result was
		// surfaced. Aborted calls append nothing and stay dangling.
		keep := errors.Is(err, ErrCancelled) && !ru.abandoned
		for inflight > 0 {
			it := <-ch
			switch {
			case it.done:
				inflight--
			case keep && it.abort == nil:
				if ru.surface(it, false) != nil {
					keep = false
				}
			}
		}
	}()
	surface := func(it taskItem) error {
		if it.done {
			inflight--
			return nil
		}
		return ru.surface(it, true)
	}
	var deferred error
	for i := range calls {
		// Sweep: surface what finished tasks queued, without blocking.
	sweep:
		for inflight > 0 {
			select {
			case it := <-ch:
				if err := surface(it); err != nil {
					return err
				}
			default:
				break sweep
			}
		}
		rc, err := ru.preflight(calls[i], finish)
		if errors.Is(err, ErrBudget) {
			deferred = err
			break
		}
		if err != nil {
			return err
		}
		if rc == nil {
			continue
		}
		if rc.tool.Sequential || rc.tool.handoff != nil {
			for inflight > 0 {
				if err := surface(<-ch); err != nil {
					return err
				}
			}
			var ierr error
			ru.execCall(batchCtx, rc, func(it taskItem) {
				if ierr == nil {
					ierr = ru.surface(it, false)
				}
			})
			if ierr != nil {
				return ierr
			}
			continue
		}
		inflight++
		go func(rc *readyCall) {
			ru.execCall(batchCtx, rc, func(it taskItem) { ch <- it })
			ch <- taskItem{done: true}
		}(rc)
	}
	for inflight > 0 {
		if err := surface(<-ch); err != nil {
			return err
		}
	}
	return deferred
}

// surface hands one task item to hooks and the consumer; a completed call's
// result is appended and saved before anything else is surfaced.
func (ru *run) surface(it taskItem, parallel bool) error {
	if it.abort != nil {
		return it.abort
	}
	if it.tcc == nil {
		return ru.emit(it.ev)
	}
	if it.handoff != nil {
		ru.pendingHandoff = it.handoff
	}
	ru.appendEntries(it.result)
	if err := ru.emit(it.tcc); err != nil {
		return err
	}
	if err := ru.save(); err != nil {
		return err
	}
	if parallel {
		return ru.cancel.Err()
	}
	return nil
}

// preflight checks one call serially. It returns nil (and no error) when the
// call was rejected.
func (ru *run) preflight(call Entry, finish string) (*readyCall, error) {
	if err := ru.cancel.Err(); err != nil {
		return nil, err
	}
	ru.toolCalls++
	if err := ru.checkBudget(); err != nil {
		return nil, err
	}
	tool := ru.act.byName[call.Name]
	if tool == nil {
		return nil, ru.reject(call, fmt.Sprintf("Tool '%s' is not available.", call.Name))
	}
	if tool.handoff != nil && ru.pendingHandoff != nil {
		return nil, ru.reject(call, fmt.Sprintf(
			"Handoff not performed: control was already transferred to '%s' in this turn; only the first handoff of a turn counts.",
			ru.pendingHandoff.handoff.Agent.Name))
	}
	argText := strings.TrimSpace(call.Arguments)
	if argText == "" {
		argText = "{}"
	}
	if argText[0] != '{' || !json.Valid([]byte(argText)) {
		var parsed any
		if err := json.Unmarshal([]byte(argText), &parsed); err != nil {
			if finish == "length" {
				return nil, ru.reject(call, fmt.Sprintf(
					"The arguments for tool '%s' are incomplete: the response hit the output token limit (finish_reason=length). Call the tool again with shorter arguments.", call.Name))
			}
			return nil, ru.reject(call, "Invalid JSON in tool arguments: "+err.Error())
		}
		return nil, ru.reject(call, fmt.Sprintf("Invalid tool arguments: expected a JSON object, got %s.", jsonTypeName(parsed)))
	}
	tc := ToolCall{ID: call.CallID, Name: call.Name, Arguments: call.Arguments}
	needs := tool.NeedsApproval
	if !needs && tool.Approval != nil {
		var obj map[string]any
		_ = json.Unmarshal([]byte(argText), &obj)
		n, err := safePredicate(ru.ctx, tool.Approval, ru.rc, obj)
		if err != nil {
			if err := ru.emit(&ToolCallFailed{Call: tc, Error: Describe(err), Err: err}); err != nil {
				return nil, err
			}
			return nil, ru.reject(call, fmt.Sprintf("Tool %s was not approved (approval check failed).", call.Name))
		}
		needs = n
	}
	var reason string
	if needs {
		approved, why, err := ru.approve(tc)
		if err != nil {
			return nil, err
		}
		if !approved {
			return nil, ru.reject(call, fmt.Sprintf("Tool %s was not approved.", call.Name))
		}
		reason = why
	}
	rc := &readyCall{call: call, tool: tool, args: json.RawMessage(argText), approval: reason}
	rc.retries = ru.agent.DefaultToolRetries
	if tool.Retries != nil {
		rc.retries = *tool.Retries
	}
	rc.timeout = tool.Timeout
	if rc.timeout == 0 {
		rc.timeout = ru.agent.DefaultToolTimeout
	}
	rc.limit = tool.MaxOutputChars
	if rc.limit == 0 {
		rc.limit = ru.agent.MaxToolOutputChars
	}
	if rc.limit == 0 {
		rc.limit = 200_000
	}
	rc.renderer = tool.Render
	if rc.renderer == nil {
		rc.renderer = ru.agent.Render
	}
	return rc, nil
}

func jsonTypeName(v any) string {
	switch v.(type) {
	case []any:
		return "array"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return "object"
}

func safePredicate(ctx context.Context, p ApprovalPredicate, rc *RunContext, args map[string]any) (n bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("approval predicate panicked: %v", r)
		}
	}()
	return p(ctx, rc, args)
}

// approve collects a decision for a gated call: in band (consumer, hooks),
// out of band (Approvals), then the approval handler; undecided → denied.
func (ru *run) approve(tc ToolCall) (bool, string, error) {
	pd := &pendingDecision{}
	ru.approvals.register(tc.ID, pd)
	defer ru.approvals.unregister(tc.ID)
	if err := ru.emit(&ApprovalRequired{Call: tc, decision: pd}); err != nil {
		return false, "", err
	}
	d, reason := pd.get()
	if d == "" {
		h := ru.opts.approvalHandler
		if h == nil {
			h = ru.agent.ApprovalHandler
		}
		if h != nil {
			v, why, err := safeHandler(ru.ctx, h, ru.rc, tc)
			switch {
			case err != nil:
				if ce := ru.cancel.Err(); ce != nil {
					return false, "", ce
				}
				if ru.parent.Err() != nil {
					// The caller stopped the run (shutdown): no decision.
					return false, "", context.Cause(ru.parent)
				}
				if err := ru.emit(&ToolCallFailed{Call: tc, Error: Describe(err), Err: err}); err != nil {
					return false, "", err
				}
				d, reason = Reject, "approval handler failed: "+err.Error()
			case v == Allow:
				d, reason = Approve, why
			case v == Deny:
				d, reason = Reject, why
			}
			if d == "" {
				d, reason = pd.get()
			}
		}
	}
	if d == "" {
		d, reason = Reject, "no decision was made (fail closed)"
	}
	if err := ru.emit(&ApprovalResolved{CallID: tc.ID, Decision: d, Reason: reason}); err != nil {
		return false, "", err
	}
	return d == Approve, reason, nil
}

func safeHandler(ctx context.Context, h ApprovalHandler, rc *RunContext, tc ToolCall) (v ApprovalVerdict, why string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("approval handler panicked: %v", r)
		}
	}()
	return h(ctx, rc, tc)
}

// reject records a pre-execution rejection: wire-safe arguments, an error
// result, ToolCallCompleted without ToolCallStarted, then a save.
func (ru *run) reject(call Entry, msg string) error {
	if !isJSONObject(call.Arguments) {
		// Copy on write: slices of the transcript were handed to stores and
		// policies, which must never see an entry change.
		ru.rc.mu.Lock()
		tr := ru.rc.entries
		for i := len(tr) - 1; i >= ru.runStart; i-- {
			if tr[i].Kind == KindToolCall && tr[i].CallID == call.CallID {
				next := make([]Entry, len(tr), cap(tr))
				copy(next, tr)
				next[i].Arguments = wireSafeArguments(tr[i].Arguments)
				ru.rc.entries = next
				break
			}
		}
		ru.rc.mu.Unlock()
	}
	res := ToolResultEntry(call.CallID, call.Name, msg, true)
	ru.appendEntries(res)
	tc := ToolCall{ID: call.CallID, Name: call.Name, Arguments: call.Arguments}
	if err := ru.emit(&ToolCallCompleted{Call: tc, Result: msg, Output: msg, IsError: true}); err != nil {
		return err
	}
	return ru.save()
}

// execCall runs one ready call and reports its events through sink. A call
// whose context was cancelled (a batch abort) reports nothing more and
// stays dangling.
func (ru *run) execCall(ctx context.Context, rc *readyCall, sink func(taskItem)) {
	tc := ToolCall{ID: rc.call.CallID, Name: rc.call.Name, Arguments: rc.call.Arguments}
	sink(taskItem{ev: &ToolCallStarted{Call: tc}})
	var span Span = noopSpan{}
	callCtx := ctx // the tool's: a tool that calls out continues the span
	if ru.tracing() {
		callCtx, span = ru.tracer.Start(ctx, "tool_call", Attr{"tool", tc.Name}, Attr{"call_id", tc.ID})
	}
	v, err := ru.invoke(withApproval(withToolCall(callCtx, tc), rc.approval), rc)
	span.End(err)
	if err != nil {
		if errors.Is(err, ErrCancelled) {
			sink(taskItem{abort: err})
			return
		}
		if ctx.Err() != nil {
			if ce := ru.cancel.Err(); ce != nil {
				sink(taskItem{abort: ce})
			}
			return
		}
		failCall(sink, tc, err, "")
		return
	}
	if sig, ok := v.(*handoffSignal); ok {
		if h := sig.handoff; h.OnHandoff != nil {
			if err := h.OnHandoff(ctx, ru.rc, sig.reason); err != nil {
				failCall(sink, tc, err, "handoff failed: ")
				return
			}
		}
		out := HandoffOutputPrefix + sig.handoff.Agent.Name
		if sig.reason != "" {
			out += " (" + sig.reason + ")"
		}
		sink(taskItem{
			result:  ToolResultEntry(tc.ID, tc.Name, out, false),
			tcc:     &ToolCallCompleted{Call: tc, Output: out},
			handoff: sig,
		})
		return
	}
	res := ToolResultEntry(tc.ID, tc.Name, "", false)
	var parts []Part
	switch p := v.(type) {
	case Part:
		parts = []Part{p}
	case []Part:
		parts = p
	}
	if parts != nil {
		res.Parts = parts
		res.Output = PartsText(parts)
	} else {
		out, rerr := renderResult(rc.renderer, v)
		if rerr != nil {
			failCall(sink, tc, rerr, "result rendering failed: ")
			return
		}
		res.Output = out
		if _, isString := v.(string); !isString && v != nil && len(out) <= 16_000 {
			if b, err := json.Marshal(v); err == nil {
				res.Raw = b
			}
		}
	}
	if rc.limit > 0 && len(res.Output) > rc.limit {
		if capped, cut := capOutput(res.Output, rc.limit); cut {
			res.Output, res.Raw, res.Parts = capped, nil, nil
		}
	}
	sink(taskItem{result: res, tcc: &ToolCallCompleted{Call: tc, Result: v, Output: res.Output}})
}

// failCall reports a call that failed while executing: ToolCallFailed,
// then an error result "Tool error: <what><message>" the model sees.
func failCall(sink func(taskItem), tc ToolCall, err error, what string) {
	sink(taskItem{ev: &ToolCallFailed{Call: tc, Error: Describe(err), Err: err}})
	msg := "Tool error: " + what + modelText(err)
	sink(taskItem{
		result: ToolResultEntry(tc.ID, tc.Name, msg, true),
		tcc:    &ToolCallCompleted{Call: tc, Result: msg, Output: msg, IsError: true},
	})
}

func renderResult(r Renderer, v any) (out string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("renderer panicked: %v", p)
		}
	}()
	if r != nil {
		return r(v)
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case nil:
		return "null", nil
	case fmt.Stringer:
		if _, isErr := v.(error); !isErr {
			b, jerr := json.Marshal(v)
			if jerr == nil {
				return string(b), nil
			}
			return x.String(), nil
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v), nil
	}
	return string(b), nil
}

// capOutput keeps 80% head and 20% tail of s (in characters) around a
// marker when s has more than limit characters.
func capOutput(s string, limit int) (string, bool) {
	n := utf8.RuneCountInString(s)
	if n <= limit {
		return s, false
	}
	head := limit * 8 / 10
	tail := limit - head
	r := []rune(s)
	var b strings.Builder
	b.Grow(len(s) / n * limit)
	b.WriteString(string(r[:head]))
	fmt.Fprintf(&b, "\n[... tool output truncated: kept %s of %s chars ...]\n", thousands(limit), thousands(n))
	b.WriteString(string(r[n-tail:]))
	return b.String(), true
}

// thousands formats n with comma thousands separators.
func thousands(n int) string {
	s := fmt.Sprint(n)
	if len(s) <= 3 {
		return s
	}
	var b strings.Builder
	pre := len(s) % 3
	if pre > 0 {
		b.WriteString(s[:pre])
	}
	for i := pre; i < len(s); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s[i : i+3])
	}
	return b.String()
}

// modelText is the text the model reads for an error: the message lovia
// gives, without the hint line, which is for people (it stays on the
// event and on the error value).
func modelText(err error) string {
	if info := Describe(err); info.Hint != "" && info.Message != "" {
		return info.Message
	}
	return errorText(err)
}

// errorText is an error's message, or its type name when the message is
// empty.
func errorText(err error) string {
	if s := err.Error(); s != "" {
		return s
	}
	t := reflect.TypeOf(err)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}

// toolTimeoutError is an attempt that ran past its timeout.
type toolTimeoutError struct{ d time.Duration }

func (e *toolTimeoutError) Error() string { return fmt.Sprintf("tool timed out after %s", e.d) }
func (e *toolTimeoutError) Is(target error) bool {
	return target == context.DeadlineExceeded
}

// invoke runs the policy chain with retries and a per-attempt timeout.
func (ru *run) invoke(ctx context.Context, rc *readyCall) (any, error) {
	fn := rc.tool.Func
	if fn == nil {
		return nil, &ToolError{Tool: rc.tool.Name, Message: fmt.Sprintf("tool %q has no function", rc.tool.Name)}
	}
	for i := len(rc.tool.Policies) - 1; i >= 0; i-- {
		fn = rc.tool.Policies[i](rc.tool.Name, fn)
	}
	for attempt := 0; ; attempt++ {
		actx, cancel := ctx, context.CancelFunc(nil)
		if rc.timeout > 0 {
			actx, cancel = context.WithTimeoutCause(ctx, rc.timeout, &toolTimeoutError{rc.timeout})
		}
		v, err := safeCall(actx, fn, ru.rc, rc.args)
		timedOut := rc.timeout > 0 && actx.Err() != nil && ctx.Err() == nil
		if cancel != nil {
			cancel()
		}
		if err == nil {
			return v, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		if timedOut && !errors.Is(err, ErrCancelled) {
			err = &toolTimeoutError{rc.timeout}
		}
		if errors.Is(err, ErrCancelled) || errors.Is(err, ErrBudget) || errors.Is(err, ErrInvalidToolArgs) || attempt >= rc.retries {
			return nil, err
		}
		d := 100 * time.Millisecond << attempt
		if d > 5*time.Second || d <= 0 {
			d = 5 * time.Second
		}
		if err := sleepCtx(ctx, d); err != nil {
			return nil, err
		}
	}
}

func safeCall(ctx context.Context, fn ToolFunc, rc *RunContext, args json.RawMessage) (v any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("tool panicked: %v", p)
		}
	}()
	return fn(ctx, rc, args)
}

// stopped reports the caller's cancellation (a shutdown) after a tool
// phase: calls it interrupted left no result, so the turn must not end.
func (ru *run) stopped() error {
	if ru.parent.Err() != nil {
		return context.Cause(ru.parent)
	}
	return nil
}
