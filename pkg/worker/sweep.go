package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/lifecycle"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// TypeRunLost is the error type of a run that no worker holds and whose
// request the runs stream no longer has: nothing would ever end it.
const TypeRunLost = "RunLost"

// No run left behind. Every accepted submission ends with exactly one
// terminal event and a terminal status. Two watchers make sure of it:
//
//   - The reaper (takeover.go), on releasing a dead worker's run, checks
//     that the run can still end: its request is in the runs stream, or its
//     outcome is out. A run that says queued or running while no worker
//     holds it and its request is gone is repaired from its terminal event
//     when one is stored, and otherwise abandoned: run_failed (RunLost) on
//     its own subject and a failed status, with the hint to resubmit it,
//     which resumes it from its checkpoint.
//   - The sweep (below) finds run requests that no consumer routes — raw
//     publishes for an agent no worker of the fleet serves — and indexes
//     their runs as queued, so their status says why they wait.

// sweep runs the unrouted-request sweep every SweepInterval until ctx ends.
func (w *Worker) sweep(ctx context.Context) {
	defer close(w.sweepDone)
	seen := map[string]uint64{} // subject → last stream seq indexed
	t := time.NewTicker(w.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := w.sweepUnrouted(ctx, seen); err != nil && ctx.Err() == nil {
				w.log.Debug("sweep of unrouted run requests failed; retrying", "error", err)
			}
			w.measurePending(ctx)
		}
	}
}

// sweepUnrouted indexes, as queued, the runs of requests waiting in the
// runs stream under an agent that has no consumer (at most 100 a pass).
func (w *Worker) sweepUnrouted(ctx context.Context, seen map[string]uint64) error {
	cctx, cancel := context.WithTimeout(ctx, w.cfg.StoreTimeout)
	defer cancel()
	info, err := w.runsStream.Info(cctx, jetstream.WithSubjectFilter(w.names.SubmitWildcard()))
	if err != nil {
		return err
	}
	if len(info.State.Subjects) == 0 {
		clear(seen)
		return nil
	}
	routed, err := bus.AgentConsumers(cctx, w.js, w.names)
	if err != nil {
		return err
	}
	isRouted := map[string]bool{}
	for _, a := range routed {
		isRouted[a] = true
	}
	budget := 100
	for subject := range info.State.Subjects {
		agent, err := w.names.ParseSubmit(subject)
		if err != nil || isRouted[agent] {
			delete(seen, subject)
			continue
		}
		for budget > 0 {
			budget--
			msg, err := w.runsStream.GetMsg(cctx, seen[subject]+1, jetstream.WithGetMsgSubject(subject))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				break
			}
			if err != nil {
				return fmt.Errorf("read unrouted request on %s: %w", subject, err)
			}
			seen[subject] = msg.Sequence
			w.indexUnrouted(cctx, agent, msg)
		}
	}
	return nil
}

// indexUnrouted indexes the run of an unrouted request as queued (unless
// it is indexed already).
func (w *Worker) indexUnrouted(ctx context.Context, agent string, msg *jetstream.RawStreamMsg) {
	req, _, err := bus.DecodeRunRequest(msg.Header, msg.Data)
	if err != nil || req == nil {
		req = &bus.RunRequest{}
	}
	runID, err := bus.RawSubmitRunID(req, msg.Header, msg.Sequence)
	if err != nil {
		return
	}
	rec := lifecycle.Unrouted(lifecycle.Submission{RunID: runID, Agent: agent, SessionID: req.SessionID, Metadata: req.Metadata}, msg.Sequence)
	if _, err := w.st.Runs().Create(ctx, rec); err == nil {
		w.log.Warn("a run request waits for an agent no worker serves; indexed as queued", "run_id", runID, "agent", agent)
	}
}

// checkLost makes sure a run whose dead holder was just released can
// still end (see above).
func (w *Worker) checkLost(ctx context.Context, runID string) {
	e, err := w.st.Runs().Get(ctx, runID)
	if err != nil || (e.Record.Status != store.RunRunning && e.Record.Status != store.RunQueued) || e.Record.RequestSeq == 0 {
		return
	}
	stored, err := bus.RequestStored(ctx, w.js, w.names, e.Record.RequestSeq)
	if err != nil || stored {
		return
	}
	w.abandon(ctx, e)
}

// abandon ends a run no worker holds and no request will resume: from its
// stored terminal event when there is one, else with run_failed RunLost.
func (w *Worker) abandon(ctx context.Context, e *store.RunEntry) {
	runID := e.Record.RunID
	last, err := w.lastEvent(ctx, runID)
	if err != nil {
		return
	}
	if last != nil && last.IsTerminal() && last.Request == e.Record.RequestSeq {
		if ev, err := last.Event(); err == nil {
			_, _ = w.st.Runs().Modify(ctx, runID, lifecycle.Modify(func(r store.RunRecord) (store.RunRecord, error) {
				return lifecycle.Finish(r, ev, last.Stored)
			}))
			w.log.Info("a released run had ended: its status now says so", "run_id", runID)
		}
		return
	}
	info := loop.ErrorInfo{
		Type:    TypeRunLost,
		Message: fmt.Sprintf("run %s was %s with no worker holding it and no request left to resume it", runID, e.Record.Status),
		Hint:    "resubmit it with the same run_id (if_run_exists resume): it continues from its last checkpoint",
	}
	_, err = w.st.Runs().Modify(ctx, runID, lifecycle.Modify(func(r store.RunRecord) (store.RunRecord, error) {
		if r.RequestSeq != e.Record.RequestSeq {
			return r, &lifecycle.Refusal{Transition: "abandon", State: r.Status, Err: lifecycle.ErrNotStuck}
		}
		return lifecycle.Abandon(r, info, w.cfg.Clock())
	}))
	if err != nil {
		return
	}
	rp, err := w.pub.Open(ctx, runID, bus.JSON)
	if err == nil {
		rp.SetRequest(e.Record.RequestSeq)
		_, err = rp.Publish(ctx, runFailed(e.Record.Agent, info))
		if cerr := rp.Close(ctx); err == nil {
			err = cerr
		}
	}
	if err != nil {
		w.log.Warn("abandoning a lost run: publishing run_failed failed", "run_id", runID, "error", err)
	}
	w.m.abandoned.Inc()
	w.log.Warn("run lost: no worker holds it and its request is gone; failed it", "run_id", runID)
}

// measurePending exports the work-queue depth of each agent this worker
// serves (lovia_runs_pending): the signal to scale workers on.
func (w *Worker) measurePending(ctx context.Context) {
	for _, agent := range w.served() {
		name, err := w.names.AgentConsumer(agent)
		if err != nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, w.cfg.StoreTimeout)
		c, err := w.js.Consumer(cctx, w.names.RunsStream(), name)
		if err == nil {
			if info, err := c.Info(cctx); err == nil {
				w.m.pending.WithLabelValues(agent).Set(float64(info.NumPending))
			}
		}
		cancel()
	}
}
