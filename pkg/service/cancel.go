package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/internal/jsapi"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/lifecycle"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// Cancel ends a run on request (invariant 14: a cancel ends the run, held
// or not). The cancel request is stored first, for whoever holds the run
// or claims it next. A run no worker holds — queued, parked — is then
// ended here at once (lifecycle.CancelUnheld, a compare-and-set on its
// record that every claim of it is fenced by): its run_failed
// (RunCancelled) is published on its subject and its request removed from
// the runs stream. A run a worker holds is ended by that worker, which
// the cancel notifies. A run that has ended is answered cancelled: false.
func (a *API) Cancel(ctx context.Context, runID string, req *bus.CancelRequest) (*bus.CancelReply, error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	rec, err := a.liveRun(ctx, runID, false)
	if err != nil {
		return nil, err
	}
	if rec.Status.Ended() {
		if lifecycle.CancelledUnheld(*rec) && !a.toldCancelled(ctx, rec) {
			// A cancel that ended it died before its run_failed was out
			// (or its request removed): this repeat finishes it.
			a.finishCancel(ctx, rec, 0)
		}
		return &bus.CancelReply{RunID: runID, Cancelled: false, Status: string(rec.Status)}, nil
	}
	if _, err := a.cfg.Store.Control().RequestCancel(ctx, runID, rec.Submissions, req.Reason); err != nil {
		return nil, err
	}
	if rec.Status == store.RunQueued || rec.Status == store.RunParked {
		rep, err := a.cancelUnheld(ctx, runID, req.Reason)
		if err != nil {
			// The cancel is stored: the run's next claim applies it.
			a.log.Warn("ending a cancelled run that no worker holds failed; its next claim ends it", "run_id", runID, "error", err)
		} else if rep != nil {
			return rep, nil
		}
	}
	if !a.delivered(ctx, runID, rec.Submissions) {
		// The run ended and was submitted again meanwhile: the cancel
		// belongs to the submission that ended.
		return &bus.CancelReply{RunID: runID, Cancelled: false, Status: string(store.RunFailed)}, nil
	}
	return &bus.CancelReply{RunID: runID, Cancelled: true, Status: string(wireState(rec.Status))}, nil
}

// cancelReason is the message of a cancelled run's error.
func cancelReason(r string) string {
	if strings.TrimSpace(r) == "" {
		return "cancelled by request"
	}
	return r
}

// cancelUnheld ends a run that no worker holds, on its stored cancel
// request. It returns the reply when the run is over (ended here, or by
// another writer meanwhile), nil when a worker holds it now (it applies
// the cancel).
func (a *API) cancelUnheld(ctx context.Context, runID, reason string) (*bus.CancelReply, error) {
	runs, err := a.js.Stream(ctx, a.names.RunsStream())
	if err != nil {
		return nil, fmt.Errorf("cancel %s: read the runs stream: %w", runID, err)
	}
	// Every request of the run stored by now is at or below horizon.
	horizon := runs.CachedInfo().State.LastSeq
	info := loop.ErrorInfo{Type: "RunCancelled", Message: cancelReason(reason), Hint: loop.CancelledHint}
	var before store.RunRecord
	e, err := a.cfg.Store.Runs().Modify(ctx, runID, func(r *store.RunRecord) error {
		before = *r
		next, err := lifecycle.CancelUnheld(*r, info, time.Now(), horizon)
		if err != nil {
			return err
		}
		*r = next
		return nil
	})
	switch {
	case errors.Is(err, lifecycle.ErrHeld):
		return nil, nil
	case errors.Is(err, lifecycle.ErrEnded):
		// Ended meanwhile: by its holder, or by a cancel that came first.
		return &bus.CancelReply{RunID: runID, Cancelled: false, Status: string(before.Status)}, nil
	case err != nil:
		return nil, err
	}
	// No claim of the submission can win now: its requests are stale.
	a.finishCancel(ctx, &e.Record, before.RequestSeq)
	if p := before.Parked; p != nil {
		if err := a.cfg.Store.Control().ClearParkTimer(ctx, runID, p.TimerRevision); err != nil {
			a.log.Debug("clearing a cancelled parked run's timer failed (its wake finds the run ended)", "run_id", runID, "error", err)
		}
	}
	a.log.Info("run cancelled while no worker held it", "run_id", runID, "was", before.Status)
	return &bus.CancelReply{RunID: runID, Cancelled: true, Status: string(store.RunFailed)}, nil
}

// finishCancel publishes the run_failed of rec, a run CancelUnheld ended
// (unless it is out), and removes the run's requests from the runs
// stream: the one stored at seq (its request before the cancel), or,
// when seq is 0, those found among its agent's requests since it was
// indexed, up to the cancel's horizon (rec.RequestSeq). Their encoding is
// the events'.
func (a *API) finishCancel(ctx context.Context, rec *store.RunRecord, seq uint64) {
	seqs, enc := a.requestsOf(ctx, rec, seq, rec.RequestSeq)
	a.tellCancelled(ctx, rec, enc)
	if len(seqs) == 0 {
		return
	}
	const warn = "removing a cancelled run's request from the runs stream failed; a worker that claims it terminates it"
	runs, err := a.js.Stream(ctx, a.names.RunsStream())
	if err != nil {
		a.log.Warn(warn, "run_id", rec.RunID, "error", err)
		return
	}
	for _, seq := range seqs {
		if err := runs.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			a.log.Warn(warn, "run_id", rec.RunID, "seq", seq, "error", err)
		}
	}
}

// maxRequestScan bounds the runs-stream messages requestsOf reads to
// find a first submission's request, whose sequence no record names.
const maxRequestScan = 1000

// requestsOf finds the requests of rec's run in the runs stream — the one
// stored at seq, or, when seq is 0, those of its agent stored since the
// run was indexed, up to horizon — and the encoding of the run's events
// they ask for (JSON when none is found). A record names its current
// request once a worker claimed it or the API resubmitted it; a first
// submission's is found by the scan.
func (a *API) requestsOf(ctx context.Context, rec *store.RunRecord, seq, horizon uint64) ([]uint64, bus.Encoding) {
	stream := a.names.RunsStream()
	var seqs []uint64
	enc := bus.Encoding("")
	take := func(m *jsapi.Msg) bool {
		h, _ := decodeHeaders(m.Header)
		if requestRunID(h, m) != rec.RunID {
			return false
		}
		seqs = append(seqs, m.Seq)
		if enc == "" {
			if req, arrived, _ := bus.DecodeRunRequest(h, m.Data); req != nil {
				enc = req.EventEncoding(arrived)
			}
		}
		return true
	}
	if seq != 0 {
		if m, err := jsapi.LeaderGet(ctx, a.js, stream, jsapi.BySeq(seq)); err == nil && m != nil {
			take(m)
		}
	} else if subject, err := a.names.Submit(rec.Agent); err == nil {
		// The request was published after the record's create, by this
		// API's clock; a minute covers the clocks' skew.
		q := jsapi.NextBySubjectSince(subject, rec.CreatedAt.Add(-time.Minute))
		for range maxRequestScan {
			m, err := jsapi.LeaderGet(ctx, a.js, stream, q)
			if err != nil || m == nil || m.Seq > horizon {
				break
			}
			if take(m) && rec.Requeues == 0 {
				break // a submission never requeued has one request
			}
			q = jsapi.NextBySubject(subject, m.Seq+1)
		}
	}
	if enc == "" {
		enc = bus.JSON
	}
	return seqs, enc
}

func decodeHeaders(raw []byte) (nats.Header, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	return nats.DecodeHeadersMsg(raw)
}

// requestRunID is the run a stored run request is of: its message id's
// run (<run_id>[.<n>][.<suffix>]), else its body's run_id.
func requestRunID(h nats.Header, m *jsapi.Msg) string {
	if id := h.Get(bus.HeaderMsgID); id != "" {
		run, _, _ := strings.Cut(id, ".")
		return run
	}
	if req := bus.PeekRunRequest(h, m.Data); req != nil {
		return req.RunID
	}
	return ""
}

// toldCancelled reports whether rec's run_failed, the one CancelUnheld
// stamped with the record's request, is the run's last event (true also
// when that cannot be read: a repeat of the cancel is no time to guess).
func (a *API) toldCancelled(ctx context.Context, rec *store.RunRecord) bool {
	last, err := a.pub.LastEvent(ctx, rec.RunID)
	if err != nil {
		return true
	}
	return last != nil && last.IsTerminal() && last.Request == rec.RequestSeq
}

// tellCancelled publishes the run_failed of rec, a run CancelUnheld
// ended, unless it is out already (a repeat of the cancel): after the
// run's last event, in that event's encoding (enc when it has none), as
// its active agent, stamped with the record's request (the cancel's
// horizon), which names it as this submission's.
func (a *API) tellCancelled(ctx context.Context, rec *store.RunRecord, enc bus.Encoding) {
	ctx = context.WithoutCancel(ctx)
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	for range 3 {
		last, err := a.pub.LastEvent(ctx, rec.RunID)
		if err != nil {
			a.log.Warn("a cancelled run's run_failed could not be published: its last event cannot be read; cancel it again to retry", "run_id", rec.RunID, "error", err)
			return
		}
		ev := &loop.RunFailed{Error: *rec.Error}
		ev.Agent = rec.Agent
		var lastSeq uint64
		if last != nil {
			// (A horizon of 0 is a runs stream that never stored a
			// request: no earlier submission's terminal event can be
			// there.)
			if last.IsTerminal() && last.Request == rec.RequestSeq {
				return // out already
			}
			lastSeq = last.HighSeq
			if last.Agent != "" {
				ev.Agent = last.Agent
			}
			ev.Turn = last.Turn
			if last.Encoding.Valid() {
				enc = last.Encoding
			}
		}
		rp, err := a.pub.Resume(rec.RunID, enc, lastSeq)
		if err == nil {
			rp.SetRequest(rec.RequestSeq)
			if _, err = rp.Publish(ctx, ev); err == nil {
				err = rp.Close(ctx)
			}
		}
		if err != nil {
			a.log.Warn("publishing a cancelled run's run_failed failed; cancel it again to retry", "run_id", rec.RunID, "error", err)
			return
		}
		if rp.Duplicates() == 0 {
			return
		}
		// Its seq was taken (a worker that lost the run still publishing):
		// after the new last event.
	}
}
