package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/lifecycle"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// activeRun is a run this worker executes.
type activeRun struct {
	id     string
	seq    uint64 // stream sequence of the request
	cancel *loop.CancelToken
	notify chan struct{} // a control change arrived (approval decided)
	// mailbox is set once the run's options are built.
	mailbox atomic.Pointer[runMailbox]
	// stop ends the run's context; parking is set (before stop is called
	// with errParked) when the run parks on an approval.
	stop    context.CancelCauseFunc
	parking atomic.Pointer[parking]
	// submission is the run's submission this execution belongs to (its
	// control records are stamped with it); 0 until the claim sets it.
	submission atomic.Int64
	// controlSeen is set by the first control notification for the run
	// (a cancel, an inject, a decision): a quiet claim reads them then.
	controlSeen atomic.Bool
}

func (ar *activeRun) loadMailbox() *runMailbox { return ar.mailbox.Load() }

// delivery is one claim of a run request.
type delivery struct {
	msg        jetstream.Msg
	meta       *jetstream.MsgMetadata
	firstClaim bool
	// published is true when events of this submission are already in the
	// stream (an earlier claim published them).
	published bool
	// fresh is true when no claim of this submission has published
	// anything: the first delivery, or a redelivery of one released before
	// its run started (a transient error, a shutdown). The request's
	// if_run_exists applies to a fresh claim; any other continues the
	// submission.
	fresh bool
	// continued is true for a request that resumes a parked run
	// (HeaderContinues): its first claim continues the submission.
	continued bool
	// unclaimed is true when the claim found the run never claimed
	// (attempt 0, queued): it has no checkpoint, so the loop starts
	// without reading one (its first write creates it, and fails fenced
	// if one was stored after all).
	unclaimed bool
	// quiet is true when the record the claim won was quiet (see
	// store.RunRecord.Quiet): no cancel request or mailbox message was
	// stored for the run before its claim, so the run starts without
	// reading them (unless a control notification came meanwhile).
	quiet bool
	// entry is the run record as the claim wrote it, until the run's
	// outcome is recorded on it (see indexOutcome); nil when unknown.
	entry *store.RunEntry
	log   *slog.Logger
}

// handle executes one delivery from claim to ack.
func (w *Worker) handle(msg jetstream.Msg) {
	meta, err := msg.Metadata()
	if err != nil {
		w.log.Error("claim: message without metadata; terminating it", "error", err)
		_ = msg.Term()
		return
	}
	d := &delivery{msg: msg, meta: meta, firstClaim: meta.NumDelivered == 1, log: w.log}
	if !d.firstClaim {
		w.m.redeliveries.Inc()
	}
	ctx := w.runCtx

	// Decode and validate: a poison request ends here with run_failed.
	subjAgent, _ := w.names.ParseSubmit(msg.Subject())
	if len(msg.Data()) > w.cfg.MaxRequestBytes {
		w.poison(ctx, d, poisonRunID(bus.PeekRunRequest(msg.Headers(), msg.Data()), msg.Headers(), meta.Sequence.Stream), subjAgent, bus.JSON, bus.TypeInvalidRequest,
			fmt.Sprintf("run request is %d bytes, over the %d-byte limit", len(msg.Data()), w.cfg.MaxRequestBytes),
			"send a smaller input, or raise the worker's request limit")
		return
	}
	req, enc, derr := bus.DecodeRunRequest(msg.Headers(), msg.Data())
	if derr != nil {
		id := poisonRunID(req, msg.Headers(), meta.Sequence.Stream)
		if enc == "" {
			enc = bus.JSON
		}
		info := bus.ErrorFor(derr)
		w.poison(ctx, d, id, subjAgent, enc, bus.TypeInvalidRequest, info.Message, "fix the request body: JSON or msgpack with the fields of docs/protocol.md#run-request")
		return
	}
	runID, err := bus.RawSubmitRunID(req, msg.Headers(), meta.Sequence.Stream)
	if err != nil {
		w.poison(ctx, d, poisonRunID(nil, nil, meta.Sequence.Stream), subjAgent, enc, bus.TypeInvalidRequest, bus.ErrorFor(err).Message, "run ids are 1-128 characters of [A-Za-z0-9_-]")
		return
	}
	agentName := subjAgent
	if agentName == "" {
		agentName = req.Agent
	}
	if req.Encoding != "" {
		enc = req.Encoding
	}
	d.log = w.log.With("run_id", runID, "agent", agentName, "delivery", meta.NumDelivered)
	cat, rev := w.agents()
	ag, ok := cat.Get(agentName)
	if !ok {
		if ag, rev, ok = w.removedAgent(ctx, d, runID, agentName, enc); !ok {
			return
		}
	}
	w.execute(ctx, d, req, runID, enc, ag, rev)
}

// poisonRunID names the run of a request that cannot run: its run id
// (body, then Nats-Msg-Id) when that is valid, else run-<stream seq>, so
// the sender always finds a run_failed event.
func poisonRunID(req *bus.RunRequest, h nats.Header, streamSeq uint64) string {
	if req == nil {
		req = &bus.RunRequest{}
	}
	if id, err := bus.RawSubmitRunID(req, h, streamSeq); err == nil {
		return id
	}
	return "run-" + strconv.FormatUint(streamSeq, 10)
}

// poison ends an invalid request: a run it names is indexed as failed and
// gets a run_failed event (unless another request of that run is running
// or completed: that one is left alone), and the message is terminated
// (never redelivered).
func (w *Worker) poison(ctx context.Context, d *delivery, runID, agent string, enc bus.Encoding, typ, msg, hint string) {
	w.m.poison.WithLabelValues(typ).Inc()
	w.m.failed.WithLabelValues(agent, typ).Inc() // a poison request is a failed run too
	d.log.Warn("poison run request terminated", "run_id", runID, "type", typ, "error", msg)
	if runID != "" {
		info := loop.ErrorInfo{Type: typ, Message: msg, Hint: hint}
		if publish, queued := w.failPoisonRun(ctx, runID, agent, &info, d.meta.Sequence.Stream, int(bus.HeaderUint(d.msg.Headers(), bus.HeaderSubmission))); publish {
			if rp, err := w.pub.Open(ctx, runID, enc); err == nil {
				rp.SetRequest(d.meta.Sequence.Stream)
				if last, _ := w.lastEvent(ctx, runID); last == nil || !last.IsTerminal() || queued {
					_, _ = rp.Publish(ctx, runFailed(agent, info))
				}
				if err := rp.Close(ctx); err != nil {
					d.log.Warn("poison: publishing run_failed failed", "error", err)
				}
			}
		}
	}
	w.settleMsg(ctx, d, lifecycle.Verdict{Settle: lifecycle.Term, Reason: typ + ": " + msg})
}

// failPoisonRun indexes the run of a poison request as failed. It reports
// whether run_failed may be published: for a run this request creates, or
// one queued for it (an API without a catalog accepts any agent name); for
// a run already failed only if its last event is not terminal (the caller
// checks: a redelivery after a crash before the publish); never for a run
// that is running or completed, whose record and events belong to another
// request, nor for a stale copy of an earlier or superseded request (see
// lifecycle.IsStale).
func (w *Worker) failPoisonRun(ctx context.Context, runID, agent string, info *loop.ErrorInfo, seq uint64, submission int) (publish, queued bool) {
	now := w.cfg.Clock()
	_, err := w.st.Runs().Create(ctx, lifecycle.RejectNew(runID, agent, *info, w.cfg.ID, now))
	if !errors.Is(err, store.ErrRunExists) {
		return true, false
	}
	_, err = w.st.Runs().Modify(ctx, runID, lifecycle.Modify(func(r store.RunRecord) (store.RunRecord, error) {
		publish = r.Status == store.RunFailed
		return lifecycle.Reject(r, *info, w.cfg.ID, now, seq, submission)
	}))
	switch {
	case err == nil:
		return true, true
	case errors.Is(err, lifecycle.ErrEnded), errors.Is(err, lifecycle.ErrInFlight), errors.Is(err, lifecycle.ErrStale):
		return publish, false
	}
	w.log.Warn("poison: run index update failed", "run_id", runID, "error", err)
	return publish, false
}

// lastEvent returns the last stored event of a run, or nil. It is read
// from the stream leader (a replica may lag).
func (w *Worker) lastEvent(ctx context.Context, runID string) (*bus.StoredEvent, error) {
	cctx, cancel := context.WithTimeout(ctx, w.cfg.StoreTimeout)
	defer cancel()
	return w.pub.LastEvent(cctx, runID)
}

// ofRequest reports whether last was published by a claim of the request
// stored at streamSeq (stamped ts): by its Lovia-Request header, or, for
// events without one, by its storage time (the cluster's clock, like the
// request's).
func ofRequest(last *bus.StoredEvent, streamSeq uint64, ts time.Time) bool {
	if last == nil {
		return false
	}
	if last.Request != 0 {
		return last.Request == streamSeq
	}
	return !last.Stored.Before(ts)
}

// applyCancel cancels the run when its cancel record is stored.
func (w *Worker) applyCancel(ctx context.Context, runID string, ar *activeRun) {
	sub := int(ar.submission.Load())
	if sub == 0 {
		return // not claimed yet: the claim looks
	}
	cctx, cancel := context.WithTimeout(ctx, w.cfg.StoreTimeout)
	defer cancel()
	if cr, err := w.st.Control().CancelRequested(cctx, runID, sub); err == nil && cr != nil {
		ar.cancel.Cancel(cancelReason(cr.Reason))
	}
}

func cancelReason(r string) string {
	if r == "" {
		return "cancelled by request"
	}
	return r
}

// runOptions builds the loop options of a request whose events sink
// publishes.
func (w *Worker) runOptions(req *bus.RunRequest, runID string, ag *catalog.Agent, ar *activeRun, sink *eventSink, fresh, unclaimed, quiet bool) ([]loop.RunOption, error) {
	smb, err := w.st.Mailbox(runID)
	if err != nil {
		return nil, err
	}
	mb := newRunMailbox(smb)
	if quiet {
		// Nothing was queued before the claim: read at the next
		// notification (or push), or after mailboxRecheck.
		mb.settle()
	}
	ar.mailbox.Store(mb)
	if quiet && ar.controlSeen.Load() {
		mb.touch() // notified while the mailbox was being made
	}
	ifExists := loop.IfRunExists(req.IfRunExists)
	if !fresh || ifExists == "" {
		// A redelivery continues the same submission.
		ifExists = loop.ResumeRun
	}
	maxTurns := req.MaxTurns
	if maxTurns == 0 {
		maxTurns = ag.MaxTurns
	}
	if maxTurns == 0 {
		maxTurns = bus.DefaultMaxTurns
	}
	var cp loop.Checkpointer = w.st.Checkpointer()
	if unclaimed && w.freshCkpt {
		cp = noSnapshot{cp}
	}
	cp = eventsFirst{Checkpointer: cp, sink: sink}
	opts := []loop.RunOption{
		loop.WithCheckpoint(cp, runID),
		loop.WithIfRunExists(ifExists),
		loop.WithMailbox(mb),
		loop.WithCancelToken(ar.cancel),
		loop.WithMaxTurns(maxTurns),
		loop.WithApprovalHandler(w.approvalHandler(runID, ar, ag.ApprovalTimeout)),
		loop.WithDeps(w.cfg.Deps),
	}
	if req.SessionID != "" {
		opts = append(opts, loop.WithSession(w.st.Session(), req.SessionID))
	}
	if b := req.Budget; b != nil {
		opts = append(opts, loop.WithBudget(loop.Budget{
			MaxInputTokens: b.MaxInputTokens, MaxOutputTokens: b.MaxOutputTokens, MaxTotalTokens: b.MaxTotalTokens,
			MaxToolCalls: int(b.MaxToolCalls), MaxDuration: time.Duration(b.MaxSeconds * float64(time.Second)),
		}))
	}
	if len(req.OutputSchema) > 0 {
		if !json.Valid(req.OutputSchema) {
			return nil, &bus.FieldError{Field: "output_schema", Reason: "is not valid JSON"}
		}
		opts = append(opts, loop.WithOutput(&loop.OutputSpec{Name: "output", Schema: json.RawMessage(req.OutputSchema)}))
	}
	if req.ExtraInstructions != "" {
		opts = append(opts, loop.WithExtraInstructions(req.ExtraInstructions))
	}
	if req.Metadata != nil {
		opts = append(opts, loop.WithMetadata(req.Metadata))
	}
	return opts, nil
}

// noSnapshot is the checkpointer of a run never claimed before: nothing
// is stored for it, so Load answers without asking the store. Writes go
// to the store as ever; the first one (revision 0) creates the checkpoint
// with a compare-and-set, which fails fenced if one exists.
type noSnapshot struct{ loop.Checkpointer }

func (n noSnapshot) Load(_ context.Context, runID string) (*loop.Snapshot, error) {
	return nil, fmt.Errorf("worker: run %s was never claimed: %w", runID, loop.ErrNoSnapshot)
}

// finishPoison fails a run whose request turned out invalid after claim.
func (w *Worker) finishPoison(ctx context.Context, d *delivery, rp *bus.RunPublisher, runID, agent string, err error) {
	info := loop.ErrorInfo{Type: bus.TypeInvalidRequest, Message: bus.ErrorFor(err).Message, Hint: "fix the request and submit it again"}
	w.m.poison.WithLabelValues(info.Type).Inc()
	w.failAndTerminate(ctx, d, rp, runID, agent, info)
}

// healReplay runs the loop's replay (which re-appends a missing session
// segment) without publishing anything.
func (w *Worker) healReplay(ctx context.Context, d *delivery, req *bus.RunRequest, runID string, ag *catalog.Agent) {
	opts := []loop.RunOption{loop.WithCheckpoint(w.st.Checkpointer(), runID), loop.WithDeps(w.cfg.Deps)}
	if req.SessionID != "" {
		opts = append(opts, loop.WithSession(w.st.Session(), req.SessionID))
	}
	res, err := w.runner.Run(ctx, ag.Agent, nil, opts...)
	if err != nil {
		d.log.Warn("replay of a completed run failed", "error", err)
		return
	}
	_, _ = w.st.Runs().Modify(ctx, runID, lifecycle.Modify(func(r store.RunRecord) (store.RunRecord, error) {
		return lifecycle.HealOutcome(r, res, w.cfg.Clock(), d.meta.Sequence.Stream)
	}))
	w.handoff(ctx, d.log, req.SessionID, runID, ag.Name, true)
}
