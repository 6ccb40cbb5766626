package worker

import (
	"context"
	"errors"
	"time"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/lifecycle"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// errParked is the cause given to a run's context when it parks.
var errParked = errors.New("parked: waiting for an approval decision off the worker")

// parking is what an approval wait that parks its run hands to execute.
type parking struct {
	callID     string
	deadline   time.Time
	submission int
}

// park ends the claim of a run that stopped to wait for an approval
// decision off the worker: its events are flushed, its park timer and
// record are written (the record holds the request that resumes it), and
// the request is acknowledged. It reports whether the run must be woken
// at once — a decision or cancel stored meanwhile, which the API may have
// missed — which execute does last, once this execution has let go of the
// run (so a wake claimed by this very worker finds it free).
func (w *Worker) park(ctx context.Context, x *execution, p *parking) (wake bool) {
	d, runID := x.d, x.runID
	log := d.log.With("call_id", p.callID)
	release := func(msg string, err error) {
		w.release(ctx, x, time.Second, msg+": "+errString(err))
	}
	if err := x.rp.Close(ctx); err != nil {
		release("flushing the run's events before parking failed", err)
		return false
	}
	resume := *x.req
	resume.RunID, resume.Agent, resume.IfRunExists = runID, x.ag.Name, bus.IfExistsResumeOnly
	body, err := bus.Marshal(x.enc, &resume)
	if err != nil {
		release("encoding the resume request failed", err)
		return false
	}
	timer, err := w.st.Control().SetParkTimer(ctx, runID, p.deadline)
	if err != nil {
		release("storing the park timer failed", err)
		return false
	}
	parking := store.Parking{
		CallID: p.callID, Deadline: p.deadline, Request: body, ContentType: x.enc.ContentType(),
		Continues: d.meta.Sequence.Stream, TimerRevision: timer, LastSeq: x.rp.NextSeq() - 1,
		Trace: bus.TraceContextFrom(d.msg.Headers()), // the wake continues the submit's trace
	}
	_, err = w.st.Runs().Modify(ctx, runID, lifecycle.Modify(func(r store.RunRecord) (store.RunRecord, error) {
		return lifecycle.Park(r, x.holder, parking)
	}))
	if errors.Is(err, lifecycle.ErrNotHolder) {
		log.Info("not parking: another worker has claimed the run since")
		return false
	}
	if err != nil {
		release("marking the run parked failed", err)
		return false
	}
	w.m.parked.Inc()
	log.Info("run parked until an approval decision, a cancel or its deadline", "deadline", p.deadline)
	// Acknowledge before any wake: a redelivery of this request after the
	// wake's claim would be stale (it is refused, see lifecycle.IsStale).
	w.settleMsg(ctx, d, lifecycle.Verdict{Settle: lifecycle.Ack})
	if rev, err := w.st.Control().ParkTimerRevision(ctx, runID); err != nil || rev != timer {
		// A worker whose clock says the deadline has come found the run
		// not parked yet and cleared its timer: wake it now.
		return true
	}
	return w.decidedMeanwhile(ctx, runID, p.submission, p.callID)
}

// wakeNow wakes a run this worker has just parked.
func (w *Worker) wakeNow(runID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*w.cfg.StoreTimeout)
	defer cancel()
	if _, err := lifecycle.WakeRun(ctx, w.js, w.names, w.st, runID); err != nil {
		w.log.Warn("waking a run for a decision stored while it parked failed; its deadline wakes it", "run_id", runID, "error", err)
	}
}

// decidedMeanwhile reports whether a decision for the call or a cancel of
// the run is stored (or cannot be ruled out).
func (w *Worker) decidedMeanwhile(ctx context.Context, runID string, submission int, callID string) bool {
	d, err := w.st.Control().Decision(ctx, runID, submission, callID)
	if err != nil || d != nil {
		return true
	}
	c, err := w.st.Control().CancelRequested(ctx, runID, submission)
	return err != nil || c != nil
}

// parkTimers wakes parked runs at their approval deadlines. Every worker
// runs it; the wake's compare-and-set picks one.
func (w *Worker) parkTimers(ctx context.Context, updates <-chan store.ParkTimer) {
	type timer struct {
		deadline time.Time
		rev      uint64
	}
	timers := map[string]timer{}
	tick := time.NewTicker(w.cfg.TakeoverInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case t, ok := <-updates:
			if !ok {
				return
			}
			if t.Deleted {
				delete(timers, t.RunID)
			} else {
				timers[t.RunID] = timer{t.Deadline, t.Revision}
			}
		case <-tick.C:
			now := w.cfg.Clock()
			for run, t := range timers {
				if now.Before(t.deadline) {
					continue
				}
				delete(timers, run)
				woke, err := lifecycle.WakeRun(ctx, w.js, w.names, w.st, run)
				switch {
				case err != nil && !errors.Is(err, store.ErrRunNotFound):
					w.log.Warn("waking a parked run at its approval deadline failed; retrying", "run_id", run, "error", err)
					timers[run] = t
				case woke:
					w.log.Info("parked run woken at its approval deadline", "run_id", run)
				default:
					// Not parked (woken already, or claimed by a waker's
					// request): the timer is stale.
					_ = w.st.Control().ClearParkTimer(ctx, run, t.rev)
				}
			}
		}
	}
}
