package worker

import (
	"context"
	"errors"
	"time"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/lifecycle"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// settle settles the delivery of an execution after the loop returned, as
// lifecycle.Settle decides.
func (w *Worker) settle(ctx context.Context, x *execution, sink *eventSink, res *loop.RunResult, runErr error) {
	log := x.d.log
	v := lifecycle.Settle(lifecycle.Outcome{
		Fenced:        errors.Is(runErr, loop.ErrFenced) || sink.fenced,
		PublishFailed: sink.err != nil,
		Started:       sink.seen,
		Failed:        runErr != nil,
		Interrupted:   w.interrupted(runErr),
		Terminal:      sink.terminal,
	})
	switch v.Settle {
	case lifecycle.Leave:
		w.m.fenced.Inc()
		log.Warn("run fenced: another worker owns it; stopping without ack", "error", runErr)
		w.unclaim(ctx, x)
	case lifecycle.Nak:
		cause := runErr
		if sink.err != nil {
			cause = sink.err
		}
		delay := v.Delay
		if delay == 0 && (errors.Is(cause, loop.ErrUnavailable) || errors.Is(cause, bus.ErrUnavailable)) {
			// A broker outage outlasted the outage budget: give the
			// cluster a moment before any worker claims the run again.
			delay = w.cfg.ReconnectGrace
		}
		w.release(ctx, x, delay, v.Reason+": "+errString(cause))
	case lifecycle.Fail:
		// The loop refused the run before it started (if_run_exists,
		// resume_only without a checkpoint, an agent that cannot be
		// resumed, a plugin setup failure): retrying cannot help.
		info := loop.Describe(runErr)
		w.m.failed.WithLabelValues(x.ag.Name, info.Type).Inc()
		log.Warn("run refused before it started", "error", runErr)
		w.failAndTerminate(ctx, x.d, x.rp, x.runID, x.ag.Name, info)
		w.handoff(ctx, log, x.req.SessionID, x.runID, x.ag.Name, false)
	case lifecycle.Ack:
		if err := x.rp.Close(ctx); err != nil {
			log.Warn("flushing the terminal event failed; releasing the run", "error", err)
			w.settleMsg(ctx, x.d, lifecycle.Verdict{Settle: lifecycle.Nak, Delay: time.Second})
			return
		}
		if runErr == nil && res != nil {
			w.m.completed.WithLabelValues(x.ag.Name).Inc()
			w.m.tokens.WithLabelValues(x.ag.Name, "input").Add(float64(res.Usage.InputTokens))
			w.m.tokens.WithLabelValues(x.ag.Name, "output").Add(float64(res.Usage.OutputTokens))
		} else {
			w.m.failed.WithLabelValues(x.ag.Name, loop.Describe(runErr).Type).Inc()
		}
		w.settleMsg(ctx, x.d, v)
		w.handoff(ctx, log, x.req.SessionID, x.runID, x.ag.Name, runErr == nil && res != nil)
	}
}

// interrupted reports whether a run's error is about the worker, not the
// run: a shutdown, a cancellation of the worker's context, a store or
// stream that is unavailable for now.
func (w *Worker) interrupted(runErr error) bool {
	return w.runCtx.Err() != nil || errors.Is(runErr, context.Canceled) || errors.Is(runErr, errParked) ||
		errors.Is(runErr, loop.ErrUnavailable)
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// unclaim leaves the run record no worse than a fenced execution found
// it: when the record still names this claim while the run's terminal
// event is out (another execution ended the run between this claim's read
// and its fencing), the record takes that outcome instead of staying
// running under a claim that does nothing more.
func (w *Worker) unclaim(ctx context.Context, x *execution) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.StoreTimeout)
	defer cancel()
	last, err := w.lastEvent(ctx, x.runID)
	if err != nil || last == nil || !last.IsTerminal() {
		return
	}
	ev, err := last.Event()
	if err != nil {
		return
	}
	_, err = w.st.Runs().Modify(ctx, x.runID, lifecycle.Modify(func(r store.RunRecord) (store.RunRecord, error) {
		if !x.holder.Holds(r) || r.Status != store.RunRunning {
			return r, &lifecycle.Refusal{Transition: "unclaim", State: r.Status, Err: lifecycle.ErrNotHolder}
		}
		return lifecycle.Finish(r, ev, last.Stored)
	}))
	if err == nil {
		x.d.log.Info("fenced claim: the run had ended meanwhile; its status now says so")
	}
}

// settleMsg is the one place a delivery's JetStream message is settled.
func (w *Worker) settleMsg(ctx context.Context, d *delivery, v lifecycle.Verdict) {
	var err error
	switch v.Settle {
	case lifecycle.Ack:
		err = d.msg.DoubleAck(context.WithoutCancel(ctx))
	case lifecycle.Nak:
		if v.Delay > 0 {
			err = d.msg.NakWithDelay(v.Delay)
		} else {
			err = d.msg.Nak()
		}
	case lifecycle.Term, lifecycle.Fail:
		err = d.msg.TermWithReason(v.Reason)
	case lifecycle.Leave:
		return
	}
	if err != nil {
		d.log.Warn("settling the run request failed; the server redelivers it after the ack wait", "settle", v.Settle.String(), "error", err)
	}
}

// release gives the run's claim back so that another worker (or this one)
// continues it from its checkpoint: the release transition, then a NAK
// after delay. When another worker has claimed the run since this claim
// it touches nothing — the server applies a NAK by stream sequence, so it
// would release that worker's live delivery. It reports whether it
// released the run.
func (w *Worker) release(ctx context.Context, x *execution, delay time.Duration, why string) bool {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.StoreTimeout)
	defer cancel()
	_, err := w.st.Runs().Modify(rctx, x.runID, lifecycle.Modify(func(r store.RunRecord) (store.RunRecord, error) {
		return lifecycle.Release(r, x.holder)
	}))
	if errors.Is(err, lifecycle.ErrNotHolder) {
		x.d.log.Info("run not released: another worker has claimed it since", "why", why)
		return false
	}
	if err != nil {
		// The record stays running under this claim; the request is
		// released all the same (the next claim takes it over).
		x.d.log.Warn("recording the release in the run index failed", "error", err)
	}
	w.m.released.Inc()
	x.d.log.Info("run released for another worker", "why", why)
	w.settleMsg(ctx, x.d, lifecycle.Verdict{Settle: lifecycle.Nak, Delay: delay})
	return true
}

// runFailed is the run_failed of a run of agent that ended with info.
func runFailed(agent string, info loop.ErrorInfo) *loop.RunFailed {
	ev := &loop.RunFailed{Error: info}
	ev.Agent = agent
	return ev
}

// failAndTerminate ends a claimed run of agent that cannot succeed by
// retrying: the index marked failed, one run_failed (naming the agent),
// the request terminated. When the event cannot be published the request
// is released instead, so that a later delivery publishes it: a run never
// ends without its terminal event.
func (w *Worker) failAndTerminate(ctx context.Context, d *delivery, rp *bus.RunPublisher, runID, agent string, info loop.ErrorInfo) {
	ctx = context.WithoutCancel(ctx)
	failed := runFailed(agent, info)
	w.indexOutcome(ctx, d, runID, failed)
	_, err := rp.Publish(ctx, failed)
	if err == nil {
		err = rp.Close(ctx)
	}
	if err != nil {
		d.log.Warn("publishing run_failed failed; releasing the request to publish it later", "error", err)
		w.settleMsg(ctx, d, lifecycle.Verdict{Settle: lifecycle.Nak, Delay: time.Second})
		return
	}
	w.settleMsg(ctx, d, lifecycle.Verdict{Settle: lifecycle.Term, Reason: info.Type + ": " + info.Message})
}

// indexOutcome records a run's terminal event (run_completed or
// run_failed) in the run index.
//
// A claim that wrote the record keeps it (delivery.entry): the outcome is
// a compare-and-set on that revision without reading the record again.
// When another writer has changed it since (the CAS fails), or the
// transition refuses the kept copy, it reads the record and decides
// anew.
func (w *Worker) indexOutcome(ctx context.Context, d *delivery, runID string, ev loop.Event) {
	ctx = context.WithoutCancel(ctx)
	finish := lifecycle.Modify(func(r store.RunRecord) (store.RunRecord, error) {
		return lifecycle.Finish(r, ev, w.cfg.Clock())
	})
	if e := d.entry; e != nil {
		d.entry = nil
		kept := *e
		if finish(&kept.Record) == nil && w.st.Runs().Update(ctx, &kept) == nil {
			return
		}
	}
	_, err := w.st.Runs().Modify(ctx, runID, finish)
	if err != nil && !errors.Is(err, lifecycle.ErrEnded) {
		d.log.Warn("run index update failed before the terminal event", "error", err)
	}
}
