package loop

import (
	"iter"
	"sync"
	"sync/atomic"
)

// RunHandle is a prepared run. Iterate Events once to stream it, or call
// Result to run it to the end. Iteration never fails for run failures: the
// stream ends with a RunFailed event and Result returns the error. A stream
// that emitted RunStarted ends with exactly one terminal event; failures
// before RunStarted (misconfiguration, resume-policy refusals) end it with
// no events at all.
type RunHandle struct {
	run       *run
	startErr  error
	approvals *Approvals
	state     atomic.Int32
	done      chan struct{}
	result    *RunResult
	err       error
}

// Events streams the run's events. A handle streams once: iterating it a
// second time yields nothing (Result still reports the first run).
// Breaking out of the loop before the terminal event abandons the run
// (Result then returns ErrAbandoned; the last checkpoint stands).
func (h *RunHandle) Events() iter.Seq[Event] {
	return func(yield func(Event) bool) {
		if !h.state.CompareAndSwap(0, 1) {
			return
		}
		defer close(h.done)
		if h.startErr != nil {
			h.err = h.startErr
			return
		}
		h.result, h.err = h.run.execute(yield)
	}
}

// Result runs the stream to its end if nobody iterates it, waits for it to
// end, and returns the result or the run's error.
func (h *RunHandle) Result() (*RunResult, error) {
	if h.state.Load() == 0 {
		for range h.Events() {
		}
	}
	<-h.done
	return h.result, h.err
}

// Cancel trips the run's cancel token: the run ends with RunCancelled at its
// next safe point.
func (h *RunHandle) Cancel(reason string) {
	if h.run != nil {
		h.run.cancel.Cancel(reason)
	}
}

// Approvals is the out-of-band approval channel.
func (h *RunHandle) Approvals() *Approvals { return h.approvals }

// Approvals decides gated calls by call id, out of band. A decision made
// before the call asks is kept until it does.
type Approvals struct {
	mu      sync.Mutex
	pending map[string]*pendingDecision
	early   map[string]decided
}

type decided struct {
	d      Decision
	reason string
}

func newApprovals() *Approvals { return &Approvals{} }

// Approve allows the call with this id.
func (a *Approvals) Approve(callID, reason string) { a.decide(callID, Approve, reason) }

// Reject denies the call with this id.
func (a *Approvals) Reject(callID, reason string) { a.decide(callID, Reject, reason) }

func (a *Approvals) decide(callID string, d Decision, reason string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p := a.pending[callID]; p != nil {
		p.set(d, reason)
		return
	}
	if a.early == nil {
		a.early = make(map[string]decided)
	}
	a.early[callID] = decided{d, reason}
}

func (a *Approvals) register(callID string, p *pendingDecision) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e, ok := a.early[callID]; ok {
		delete(a.early, callID)
		p.set(e.d, e.reason)
	}
	if a.pending == nil {
		a.pending = make(map[string]*pendingDecision)
	}
	a.pending[callID] = p
}

func (a *Approvals) unregister(callID string) {
	a.mu.Lock()
	delete(a.pending, callID)
	a.mu.Unlock()
}
