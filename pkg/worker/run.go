package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
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
	log       *slog.Logger
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
		w.poison(ctx, d, poisonRunID(nil, msg.Headers(), meta.Sequence.Stream), subjAgent, bus.JSON, bus.TypeInvalidRequest,
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
		w.poison(ctx, d, id, subjAgent, enc, bus.TypeInvalidRequest, info.Message, "fix the request body: JSON or msgpack with the fields of PROTOCOL.md")
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
	ag, ok := w.cfg.Catalog.Get(agentName)
	if !ok {
		w.poison(ctx, d, runID, agentName, enc, bus.TypeUnknownAgent,
			fmt.Sprintf("unknown agent %q", agentName),
			fmt.Sprintf("use one of the agents this worker serves: %v (ask %s)", w.cfg.Catalog.Names(), w.names.Agents()))
		return
	}
	w.execute(ctx, d, req, runID, enc, ag)
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
	d.log.Warn("poison run request terminated", "run_id", runID, "type", typ, "error", msg)
	if runID != "" {
		info := loop.ErrorInfo{Type: typ, Message: msg, Hint: hint}
		if publish, queued := w.failPoisonRun(ctx, runID, agent, &info); publish {
			if rp, err := w.pub.Open(ctx, runID, enc); err == nil {
				rp.SetRequest(d.meta.Sequence.Stream)
				if last, _ := w.lastEvent(ctx, runID); last == nil || !last.IsTerminal() || queued {
					_, _ = rp.Publish(ctx, &loop.RunFailed{Error: info})
				}
				if err := rp.Close(ctx); err != nil {
					d.log.Warn("poison: publishing run_failed failed", "error", err)
				}
			}
		}
	}
	_ = d.msg.TermWithReason(typ + ": " + msg)
}

var errLeaveRecord = errors.New("leave the run record as it is")

// failPoisonRun indexes the run of a poison request as failed. It reports
// whether run_failed may be published: for a run this request creates, or
// one queued for it (an API without a catalog accepts any agent name); for
// a run already failed only if its last event is not terminal (the caller
// checks: a redelivery after a crash before the publish); never for a run
// that is running or completed, whose record and events belong to another
// request.
func (w *Worker) failPoisonRun(ctx context.Context, runID, agent string, info *loop.ErrorInfo) (publish, queued bool) {
	now := w.cfg.Clock().UTC()
	_, err := w.st.Runs().Create(ctx, store.RunRecord{
		RunID: runID, Agent: agent, Status: store.RunFailed, Worker: w.cfg.ID, Attempt: 1,
		Error: info, StartedAt: now, FinishedAt: now,
	})
	if !errors.Is(err, store.ErrRunExists) {
		return true, false
	}
	_, err = w.st.Runs().Modify(ctx, runID, func(r *store.RunRecord) error {
		publish, queued = r.Status == store.RunFailed, false
		if r.Status != store.RunQueued {
			return errLeaveRecord
		}
		publish, queued = true, true
		r.Status, r.Error, r.Worker, r.FinishedAt = store.RunFailed, info, w.cfg.ID, now
		return nil
	})
	if err != nil && !errors.Is(err, errLeaveRecord) {
		w.log.Warn("poison: run index update failed", "run_id", runID, "error", err)
	}
	return publish, queued
}

// lastEvent returns the last stored event of a run, or nil. It is read
// from the stream leader (a replica may lag).
func (w *Worker) lastEvent(ctx context.Context, runID string) (*bus.StoredEvent, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
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

// execute runs a valid request.
func (w *Worker) execute(ctx context.Context, d *delivery, req *bus.RunRequest, runID string, enc bus.Encoding, ag *catalog.Agent) {
	log := d.log
	// One execution per run and request on this worker: a redelivery of the
	// request this worker is executing (its claim lapsed in a stall, or a
	// takeover NAK sent on an older delivery's ack subject hit the live
	// one — the server applies acks by stream sequence) must not start a
	// second execution. The one in progress keeps the request alive with
	// its heartbeats and acks it. Registering before the claim also tells
	// this worker's takeover reaper that the run is owned here.
	var wakeAfter bool // set by a park that must wake the run: done last
	defer func() {
		if wakeAfter {
			w.wakeNow(runID)
		}
	}()
	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	ar := &activeRun{id: runID, seq: d.meta.Sequence.Stream, cancel: loop.NewCancelToken(), notify: make(chan struct{}, 1), stop: stopRun}
	w.mu.Lock()
	cur := w.active[runID]
	// An execution that is parking lets go of the run: the wake's claim
	// (here, on the same worker) takes its place.
	register := cur == nil || (cur.seq != ar.seq && cur.parking.Load() != nil)
	if register {
		w.active[runID] = ar
	}
	w.mu.Unlock()
	if cur != nil && cur.seq == ar.seq {
		log.Warn("request redelivered while this worker executes it; the execution in progress keeps it")
		return
	}
	if register {
		defer func() {
			w.mu.Lock()
			if w.active[runID] == ar {
				delete(w.active, runID)
			}
			w.mu.Unlock()
		}()
	}
	// Heartbeats keep the claim while the run lives.
	hbCtx, stopHB := context.WithCancel(context.Background())
	var hbWG sync.WaitGroup
	hbWG.Add(1)
	go func() { defer hbWG.Done(); w.heartbeat(hbCtx, d.msg, runID, ar) }()
	defer func() { stopHB(); hbWG.Wait() }()

	cp := w.st.Checkpointer()
	snap, err := cp.Load(ctx, runID)
	if err != nil && !errors.Is(err, loop.ErrNoSnapshot) {
		log.Warn("checkpoint load failed; releasing the run", "error", err)
		_ = d.msg.NakWithDelay(time.Second)
		return
	}
	last, err := w.lastEvent(ctx, runID)
	if err != nil {
		log.Warn("reading the run's last event failed; releasing the run", "error", err)
		_ = d.msg.NakWithDelay(time.Second)
		return
	}
	seq := d.meta.Sequence.Stream
	submission := int(bus.HeaderUint(d.msg.Headers(), bus.HeaderSubmission))
	continues := bus.HeaderUint(d.msg.Headers(), bus.HeaderContinues)
	// Events stored after this request was: this submission's own.
	d.published = ofRequest(last, seq, d.meta.Timestamp)
	if continues != 0 && !d.published {
		// A parked run's resume request: the parking claim's events are
		// this submission's.
		d.published = ofRequest(last, continues, time.Time{})
		d.continued = d.published
	}
	d.fresh = d.firstClaim || !d.published
	replay := snap != nil && snap.Status == loop.StatusCompleted && (req.IfRunExists != bus.IfExistsRestart || !d.fresh)
	if !d.firstClaim && d.published && last.IsTerminal() && !replay {
		// This submission already ended (its terminal event is out; the
		// worker died before the ack): exactly one terminal event.
		log.Info("redelivered request of a run that already ended; acknowledging it")
		if ev, err := last.Event(); err == nil {
			// The crash may have come before the index learnt the outcome.
			w.indexOutcome(ctx, d, runID, ev)
		}
		_ = d.msg.DoubleAck(context.WithoutCancel(ctx))
		return
	}
	if replay && (d.fresh || (last != nil && last.IsTerminal())) {
		// A completed run submitted again, or a completed run whose terminal
		// event is out but whose ack was lost: nothing new to publish. The
		// loop still heals a session append the crash may have missed.
		w.healReplay(ctx, d, req, runID, ag)
		_ = d.msg.DoubleAck(context.WithoutCancel(ctx))
		return
	}

	// Index: claim the run. A first delivery that finds the run running is
	// another request of a submission in flight (a raw publish under a
	// different Nats-Msg-Id, or racing the API's): it must not start a
	// second execution, whose events would interleave with the first's.
	var attempt int
	var parkedLast uint64 // the run's last seq when the park this request wakes began
	claim := func(r *store.RunRecord) error {
		if staleRequest(r, submission, seq) {
			return errStale
		}
		if inFlight(r, seq, continues) {
			return errInFlight
		}
		if r.Parked != nil && continues != 0 && continues == r.Parked.Continues {
			parkedLast = r.Parked.LastSeq
		}
		if submission == 0 && r.Status.Ended() {
			// A raw publish of an ended run is a new submission of it: it
			// starts without the last one's cancel and decisions.
			r.Submissions = max(r.Submissions, 1) + 1
		}
		r.Attempt++
		attempt = r.Attempt
		r.Status, r.Worker, r.Error, r.RequestSeq, r.Parked = store.RunRunning, w.cfg.ID, nil, seq, nil
		if r.StartedAt.IsZero() {
			r.StartedAt = w.cfg.Clock().UTC()
		}
		return nil
	}
	rec, err := w.st.Runs().Modify(ctx, runID, claim)
	if errors.Is(err, store.ErrRunNotFound) {
		// A raw publish: index it now.
		var e *store.RunEntry
		e, err = w.st.Runs().Create(ctx, store.RunRecord{
			RunID: runID, Agent: ag.Name, SessionID: req.SessionID, Status: store.RunRunning,
			Worker: w.cfg.ID, Attempt: 1, Metadata: req.Metadata, StartedAt: w.cfg.Clock().UTC(), RequestSeq: seq,
		})
		if errors.Is(err, store.ErrRunExists) {
			// Indexed meanwhile (the API, another raw publish): claim it
			// as any other.
			rec, err = w.st.Runs().Modify(ctx, runID, claim)
		} else if err == nil {
			rec, attempt = e, 1
		}
	}
	if errors.Is(err, errInFlight) {
		log.Info("duplicate request of a run in flight; terminated without running it")
		_ = d.msg.TermWithReason("duplicate: run " + runID + " is already running")
		return
	}
	if errors.Is(err, errStale) {
		log.Info("request of a submission that has ended or been superseded; terminated without running it", "submission", submission)
		_ = d.msg.TermWithReason("stale: a request of an earlier submission of run " + runID)
		return
	}
	if err != nil {
		log.Warn("run index update failed; releasing the run", "error", err)
		_ = d.msg.NakWithDelay(time.Second)
		return
	}
	ar.submission.Store(int64(max(rec.Record.Submissions, 1)))

	if !d.firstClaim {
		// Retire the records of the workers that held this run before, so
		// no survivor's reaper NAKs this delivery thinking it is theirs.
		if n, err := w.st.Control().ClearOtherOwners(ctx, w.cfg.ID, runID); err != nil {
			log.Warn("clearing earlier ownership records failed", "error", err)
		} else if n > 0 {
			log.Debug("cleared earlier ownership records", "count", n)
		}
	}
	if ack := d.msg.Reply(); ack != "" {
		// The record is cleared by the revision this execution set; when
		// that is unknown (the put's reply was lost: it may have landed),
		// by whatever revision is there.
		rev, err := w.st.Control().SetOwner(ctx, w.cfg.ID, runID, ack)
		if err != nil {
			log.Warn("recording run ownership failed; a crash of this worker will be noticed after the ack wait only", "error", err)
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = w.st.Control().ClearOwnerAt(cctx, w.cfg.ID, runID, rev)
		}()
	}
	// The last event was just read from the stream leader: the publisher
	// continues after it without asking again.
	var lastSeq uint64
	if last != nil {
		lastSeq = last.HighSeq
	}
	if parkedLast > lastSeq {
		// The run's events expired while it was parked (the events
		// stream's max age): it still continues its submission, after the
		// seq it had reached.
		lastSeq, d.published, d.continued = parkedLast, true, true
		log.Warn("the run's events expired while it was parked; its events continue after the last seq it published", "last_seq", parkedLast)
	}
	rp, err := w.pub.Resume(runID, enc, lastSeq)
	if err != nil {
		log.Warn("event publisher open failed; releasing the run", "error", err)
		_ = d.msg.NakWithDelay(time.Second)
		return
	}
	rp.SetRequest(seq)
	w.m.inFlight.Inc()
	defer w.m.inFlight.Dec()
	w.applyCancel(ctx, runID, ar)

	opts, err := w.runOptions(req, runID, ag, ar, d.fresh)
	if err != nil {
		w.finishPoison(ctx, d, rp, runID, err)
		return
	}
	var lastEnv *bus.Envelope
	if last != nil {
		lastEnv = last.Envelope
	}
	sink := &eventSink{w: w, d: d, rp: rp, runID: runID, agent: ag.Name, attempt: attempt, last: lastEnv, replay: replay, coalesce: w.cfg.CoalesceDeltas}
	h := w.runner.Stream(runCtx, ag.Agent, req.Input.Entries(), opts...)
	for ev := range h.Events() {
		if !sink.publish(ctx, ev) {
			break
		}
	}
	sink.close()
	res, runErr := h.Result()
	if p := ar.parking.Load(); p != nil && !sink.terminal && !sink.fenced && sink.err == nil &&
		!errors.Is(runErr, loop.ErrFenced) && w.runCtx.Err() == nil {
		wakeAfter = w.park(ctx, d, rp, req, runID, ag, enc, sink.attempt, p)
		return
	}
	w.settle(ctx, d, sink, rp, runID, ag, res, runErr)
}

// errInFlight stops the claim of a duplicate request.
var errInFlight = errors.New("the run is in flight under another request")

// inFlight reports whether run r is being executed, or waits parked for a
// decision, under another request than the one stored at seq (stating it
// continues the request stored at continues: HeaderContinues). A running
// run is claimed again only by a redelivery of its own request (a
// takeover); a parked run only by the wake of the park in place, or by a
// redelivery of the request that parked it.
func inFlight(r *store.RunRecord, seq, continues uint64) bool {
	switch r.Status {
	case store.RunRunning:
		return seq != r.RequestSeq
	case store.RunParked:
		return r.Parked == nil || (continues != r.Parked.Continues && seq != r.Parked.Continues)
	}
	return false
}

// errStale stops the claim of a request whose submission is not the run's
// current one.
var errStale = errors.New("the request's submission has ended or been superseded")

// staleRequest reports whether the request stored at seq, of the stated
// submission (HeaderSubmission; 0 when the publisher did not say), is not
// run r's current one: it belongs to an earlier submission, or it is a
// second request of the current submission, which has ended under another
// (the API published it again after deciding it was lost, and it was not).
// Raw publishes state no submission and are never stale.
//
// Whatever the request says, one stored before the request the run index
// last recorded (r.RequestSeq: the API's latest publish, or the latest
// claim) has been superseded: a parked run's parking request redelivered
// after the wake's claim, a request the API judged lost and replaced.
func staleRequest(r *store.RunRecord, submission int, seq uint64) bool {
	switch {
	case r.RequestSeq != 0 && seq < r.RequestSeq:
		return true
	case submission == 0:
		return false
	case submission < r.Submissions:
		return true
	}
	return submission == r.Submissions && r.Status.Ended() && r.RequestSeq != 0 && r.RequestSeq != seq
}

// applyCancel cancels the run when its cancel record is stored.
func (w *Worker) applyCancel(ctx context.Context, runID string, ar *activeRun) {
	sub := int(ar.submission.Load())
	if sub == 0 {
		return // not claimed yet: the claim looks
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
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

// runOptions builds the loop options of a request.
func (w *Worker) runOptions(req *bus.RunRequest, runID string, ag *catalog.Agent, ar *activeRun, fresh bool) ([]loop.RunOption, error) {
	smb, err := w.st.Mailbox(runID)
	if err != nil {
		return nil, err
	}
	mb := newRunMailbox(smb)
	ar.mailbox.Store(mb)
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
	opts := []loop.RunOption{
		loop.WithCheckpoint(w.st.Checkpointer(), runID),
		loop.WithIfRunExists(ifExists),
		loop.WithMailbox(mb),
		loop.WithCancelToken(ar.cancel),
		loop.WithMaxTurns(maxTurns),
		loop.WithApprovalHandler(w.approvalHandler(runID, ar, ag.ApprovalTimeout)),
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

// finishPoison fails a run whose request turned out invalid after claim.
func (w *Worker) finishPoison(ctx context.Context, d *delivery, rp *bus.RunPublisher, runID string, err error) {
	info := loop.ErrorInfo{Type: bus.TypeInvalidRequest, Message: bus.ErrorFor(err).Message, Hint: "fix the request and submit it again"}
	w.m.poison.WithLabelValues(info.Type).Inc()
	w.failAndTerminate(ctx, d, rp, runID, info)
}

// failAndTerminate ends a claimed run that cannot succeed by retrying: the
// index marked failed, one run_failed, the request terminated. When the
// event cannot be published the request is released instead, so that a
// later delivery publishes it: a run never ends without its terminal event.
func (w *Worker) failAndTerminate(ctx context.Context, d *delivery, rp *bus.RunPublisher, runID string, info loop.ErrorInfo) {
	ctx = context.WithoutCancel(ctx)
	failed := &loop.RunFailed{Error: info}
	w.indexOutcome(ctx, d, runID, failed)
	_, err := rp.Publish(ctx, failed)
	if err == nil {
		err = rp.Close(ctx)
	}
	if err != nil {
		d.log.Warn("publishing run_failed failed; releasing the request to publish it later", "error", err)
		_ = d.msg.NakWithDelay(time.Second)
		return
	}
	_ = d.msg.TermWithReason(info.Type + ": " + info.Message)
}

// healReplay runs the loop's replay (which re-appends a missing session
// segment) without publishing anything.
func (w *Worker) healReplay(ctx context.Context, d *delivery, req *bus.RunRequest, runID string, ag *catalog.Agent) {
	opts := []loop.RunOption{loop.WithCheckpoint(w.st.Checkpointer(), runID)}
	if req.SessionID != "" {
		opts = append(opts, loop.WithSession(w.st.Session(), req.SessionID))
	}
	res, err := w.runner.Run(ctx, ag.Agent, nil, opts...)
	if err != nil {
		d.log.Warn("replay of a completed run failed", "error", err)
		return
	}
	_, _ = w.st.Runs().Modify(ctx, runID, func(r *store.RunRecord) error {
		if r.Status != store.RunCompleted {
			r.Status, r.Result, r.Turns, r.Error = store.RunCompleted, res.Output, res.Turns, nil
			r.Usage, r.FinalAgent = &res.Usage, res.FinalAgent
			r.FinishedAt = w.cfg.Clock().UTC()
		}
		return nil
	})
}

// stillClaimed reports whether the run index still names this worker's
// claim (attempt) as the run's latest. When it cannot tell, it says yes.
func (w *Worker) stillClaimed(ctx context.Context, runID string, attempt int) bool {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	e, err := w.st.Runs().Get(rctx, runID)
	if err != nil {
		return true
	}
	return e.Record.Worker == w.cfg.ID && e.Record.Attempt == attempt
}

// releaseClaim NAKs the delivery (after delay; at once when 0) so that another
// worker continues the run from its checkpoint, unless another worker has
// claimed the run since this claim (attempt): the server applies a NAK by
// stream sequence, so it would release that worker's live delivery. It
// reports whether it released the run.
func (w *Worker) releaseClaim(ctx context.Context, d *delivery, runID string, attempt int, delay time.Duration) bool {
	if !w.stillClaimed(ctx, runID, attempt) {
		return false
	}
	if delay > 0 {
		_ = d.msg.NakWithDelay(delay)
	} else {
		_ = d.msg.Nak()
	}
	return true
}

// settle acks, releases or abandons the delivery after the loop returned.
func (w *Worker) settle(ctx context.Context, d *delivery, sink *eventSink, rp *bus.RunPublisher, runID string, ag *catalog.Agent, res *loop.RunResult, runErr error) {
	log := d.log
	switch {
	case errors.Is(runErr, loop.ErrFenced) || sink.fenced:
		// Another worker owns the run: touch nothing.
		w.m.fenced.Inc()
		log.Warn("run fenced: another worker owns it; stopping without ack", "error", runErr)
		return
	case sink.err != nil:
		// Events could not be published: another worker (or this one,
		// later) continues from the checkpoint.
		if !w.releaseClaim(ctx, d, runID, sink.attempt, time.Second) {
			log.Warn("event publishing failed, and another worker has claimed the run since; leaving it to that worker", "error", sink.err)
			return
		}
		log.Warn("event publishing failed; released the run", "error", sink.err)
		return
	case !sink.seen && runErr != nil && w.runCtx.Err() == nil && !errors.Is(runErr, context.Canceled):
		// The loop refused the run before it started (if_run_exists,
		// resume_only without a checkpoint, an agent that cannot be
		// resumed, a plugin setup failure): a clear run_failed, and the
		// request is terminated — retrying cannot help.
		info := loop.Describe(runErr)
		w.m.failed.WithLabelValues(ag.Name, info.Type).Inc()
		log.Warn("run refused before it started", "error", runErr)
		w.failAndTerminate(ctx, d, rp, runID, info)
		return
	case !sink.terminal:
		// Interrupted without a terminal event (shutdown, lost NATS):
		// release it at once for another worker.
		if !w.releaseClaim(ctx, d, runID, sink.attempt, 0) {
			log.Info("run interrupted, and another worker has claimed it since; leaving it to that worker", "cause", runErr)
			return
		}
		log.Info("run interrupted; released for another worker", "cause", runErr)
		return
	}
	if err := rp.Close(ctx); err != nil {
		log.Warn("flushing the terminal event failed; releasing the run", "error", err)
		_ = d.msg.NakWithDelay(time.Second)
		return
	}
	if runErr == nil && res != nil {
		w.m.completed.WithLabelValues(ag.Name).Inc()
		w.m.tokens.WithLabelValues(ag.Name, "input").Add(float64(res.Usage.InputTokens))
		w.m.tokens.WithLabelValues(ag.Name, "output").Add(float64(res.Usage.OutputTokens))
	} else {
		w.m.failed.WithLabelValues(ag.Name, loop.Describe(runErr).Type).Inc()
	}
	if err := d.msg.DoubleAck(context.WithoutCancel(ctx)); err != nil {
		log.Warn("ack after the terminal event failed; a redelivery will find it published", "error", err)
	}
}

// indexOutcome records a run's terminal event (run_completed or
// run_failed) in the run index.
func (w *Worker) indexOutcome(ctx context.Context, d *delivery, runID string, ev loop.Event) {
	_, err := w.st.Runs().Modify(context.WithoutCancel(ctx), runID, func(r *store.RunRecord) error {
		r.ApplyTerminal(ev, w.cfg.Clock().UTC())
		return nil
	})
	if err != nil {
		d.log.Warn("run index update failed before the terminal event", "error", err)
	}
}

// heartbeat sends ack-progress until ctx ends. It also reads the run's
// cancel record at each beat: the notification that normally delivers a
// cancel at once is core NATS, and can be lost.
func (w *Worker) heartbeat(ctx context.Context, msg jetstream.Msg, runID string, ar *activeRun) {
	t := time.NewTicker(w.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := msg.InProgress(); err != nil {
				w.log.Debug("heartbeat failed", "error", err)
			}
			if ar.cancel.Err() == nil {
				w.applyCancel(ctx, runID, ar)
			}
		}
	}
}
