package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/lifecycle"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// Config configures an API.
type Config struct {
	// Conn is the NATS connection. Required.
	Conn *nats.Conn
	// Store is the opened stores. Required.
	Store *store.Store
	// Prefix is the subject prefix. Default "lovia".
	Prefix string
	// Catalog, when set, validates agent names on submit and answers the
	// agents endpoint. Without it any agent name is accepted (the worker
	// reports UnknownAgent) and the agents endpoint is not served here.
	Catalog *catalog.Catalog
	// AgentOptions are the tools and models agents applied to the agents
	// registry are validated with (the built-in tools, the provider
	// registry).
	AgentOptions catalog.Options
	// MaxInputBytes caps a submitted input. Default 1 MiB.
	MaxInputBytes int
	// Timeout bounds each request's store and stream calls. Default 10s.
	Timeout time.Duration
	// Logger receives logs. Default: discard.
	Logger *slog.Logger
	// Tracing opens the submit spans and carries their trace context into
	// the run requests (docs/protocol.md#trace-context). Default: noop.
	Tracing trace.TracerProvider
}

// API implements the operations of the lovia service.
type API struct {
	cfg   Config
	names bus.Names
	js    jetstream.JetStream
	pub   *bus.Publisher // reads runs' last events, publishes run requests
	log   *slog.Logger
	trace apiTracing // trace.go
	// dedup is the RUNS stream's deduplication window, read once.
	dedup    atomic.Int64
	fleet    fleetState
	registry registryState
	// tailer reads a run's events (Approve checks what the run asked).
	tailerOnce sync.Once
	tailer     *bus.Tailer
	tailerErr  error
	// index is the run index of listings (runslist.go).
	index indexState
}

// NewAPI validates cfg.
func NewAPI(cfg Config) (*API, error) {
	if cfg.Conn == nil {
		return nil, errors.New("service: Config.Conn is required")
	}
	if cfg.Store == nil {
		return nil, errors.New("service: Config.Store is required (store.Open)")
	}
	if cfg.MaxInputBytes == 0 {
		cfg.MaxInputBytes = 1 << 20
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	names, err := bus.NewNames(cfg.Prefix)
	if err != nil {
		return nil, fmt.Errorf("service: Config.Prefix: %w", err)
	}
	js, err := jetstream.New(cfg.Conn)
	if err != nil {
		return nil, err
	}
	pub, err := bus.NewPublisher(js, bus.PublisherConfig{Prefix: names.Prefix()})
	if err != nil {
		return nil, err
	}
	return &API{cfg: cfg, names: names, js: js, pub: pub, log: cfg.Logger, trace: newAPITracing(cfg.Tracing)}, nil
}

// Names returns the subject names.
func (a *API) Names() bus.Names { return a.names }

func notFound(what string) *bus.APIError {
	return &bus.APIError{Type: bus.TypeNotFound, Message: what + " not found", Hint: "check the id; lovia runs list (GET /v1/runs) lists the runs the fleet knows"}
}

func invalid(field, reason string) error { return &bus.FieldError{Field: field, Reason: reason} }

// submit is Submit inside its span (trace.go).
func (a *API) submit(ctx context.Context, req *bus.RunRequest, enc bus.Encoding) (*bus.SubmitReply, error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	if req.Agent == "" {
		return nil, invalid("agent", "is required")
	}
	// The workers' validation too (bus.DecodeRunRequest runs it): every
	// API instance and every worker refuse the same requests.
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if err := a.checkAgent(ctx, req.Agent); err != nil {
		return nil, err
	}
	if n := inputSize(req.Input); n > a.cfg.MaxInputBytes {
		return nil, invalid("input", fmt.Sprintf("is %d bytes, over the %d-byte limit", n, a.cfg.MaxInputBytes))
	}
	generated := req.RunID == ""
	if generated {
		req.RunID = bus.NewRunID()
	}
	if req.Encoding == "" {
		req.Encoding = enc
	}
	if req.SessionID != "" {
		// One run at a time per session (sessionlive.go).
		reply, proceed, err := a.sessionGate(ctx, req, generated)
		if err != nil || !proceed {
			return reply, err
		}
	}
	return a.startRun(ctx, req, enc)
}

// startRun indexes and enqueues a validated request's run, or answers
// what the run's existing record says (a replay, a run in flight, a
// resubmission).
func (a *API) startRun(ctx context.Context, req *bus.RunRequest, enc bus.Encoding) (*bus.SubmitReply, error) {
	events, _ := a.names.Events(req.RunID)
	reply := &bus.SubmitReply{RunID: req.RunID, EventsSubject: events, Agent: req.Agent, Status: bus.StateQueued}
	runs := a.cfg.Store.Runs()
	if noInput(req) {
		// Only the resubmission of an existing run may omit its input (it
		// resumes the run): a run id the fleet has never seen would start a
		// run on nothing.
		if _, err := runs.Get(ctx, req.RunID); errors.Is(err, store.ErrRunNotFound) {
			return nil, &bus.FieldError{Field: "input", Reason: fmt.Sprintf(
				"is required: run %s does not exist, and only the resubmission of an existing run may omit it; give a string, or a list of {role, content}", req.RunID)}
		} else if err != nil {
			return nil, err
		}
	}
	sub := lifecycle.SubmissionOf(req) // with the input's digest, hashed once
	e, err := runs.Create(ctx, lifecycle.Submit(sub))
	switch {
	case errors.Is(err, store.ErrRunExists):
		cur, gerr := runs.Get(ctx, req.RunID)
		if gerr != nil {
			return nil, gerr
		}
		rec := a.settled(ctx, cur)
		reply.Agent = rec.Agent
		switch {
		case rec.Status == store.RunCompleted && req.IfRunExists != bus.IfExistsRestart:
			if req.IfRunExists == bus.IfExistsFail {
				return nil, invalid("run_id", fmt.Sprintf("run %s already exists (status completed); use if_run_exists resume to read its result or restart to run it again", req.RunID))
			}
			reply.Status, reply.Replayed, reply.Result = bus.StateCompleted, true, storedResult(&rec)
			// A retry sends the same input; another one is not run, and the
			// reply says so (when the record knows the run's input).
			if d := sub.InputDigest; d != "" && rec.InputDigest != "" && d != rec.InputDigest {
				reply.InputDiffers = true
			}
			return reply, nil
		case !rec.Status.Ended():
			// The same submission is in flight: never start a second run.
			// A queued one may have lost its request: see requeue.
			if rec.Status == store.RunQueued {
				again := *req
				again.Agent = rec.Agent
				if rec.Attempt > 0 {
					// The run was under way (released, woken): a request
					// published again resumes it, never restarts it.
					again.IfRunExists = bus.IfExistsResume
				}
				if err := a.requeue(ctx, cur, &again, enc); err != nil {
					return nil, err
				}
			}
			reply.Status = wireState(rec.Status)
			return reply, nil
		case req.IfRunExists == bus.IfExistsFail:
			return nil, invalid("run_id", fmt.Sprintf("run %s already exists (status %s); use if_run_exists resume or restart", req.RunID, rec.Status))
		}
		// A failed (or restarted) run: a new submission of the same run.
		if rec.Agent != "" && req.Agent != rec.Agent {
			return nil, invalid("agent", fmt.Sprintf("run %s belongs to agent %q, not %q", req.RunID, rec.Agent, req.Agent))
		}
		e, err = runs.Modify(ctx, req.RunID, lifecycle.Modify(func(r store.RunRecord) (store.RunRecord, error) {
			next, err := lifecycle.Resubmit(r)
			if err == nil && !noInput(req) {
				next.InputDigest = sub.InputDigest
			}
			return next, err
		}))
		if errors.Is(err, lifecycle.ErrNotEnded) {
			reply.Status = bus.StateQueued
			return reply, nil
		}
		if err != nil {
			return nil, err
		}
		// The new submission ignores the last one's cancel, decisions and
		// approval deadlines: they are stamped with their submission.
	case err != nil:
		return nil, err
	}
	// A run this submit has just indexed is claimed with the request's
	// stream sequence (the claim records it): no second write here. A
	// resubmission records it, as every requeue does.
	if err := a.enqueue(ctx, req, enc, e, e.Record.Submissions > 1); err != nil {
		return nil, err
	}
	return reply, nil
}

// wireState is a run status as docs/protocol.md#run-status names it: a parked run (waiting
// for an approval decision on no worker) is running.
func wireState(s store.RunStatus) bus.RunState {
	if s == store.RunParked {
		return bus.StateRunning
	}
	return bus.RunState(s)
}

// noInput reports whether req gives no input (none, or an empty list).
func noInput(req *bus.RunRequest) bool {
	return req.Input.IsZero() || req.Input.IsList() && len(req.Input.Messages) == 0
}

func inputSize(in bus.Input) int {
	n := len(in.Text)
	for _, m := range in.Messages {
		n += len(m.Content) + len(m.Role)
	}
	return n
}

// settled returns the run's record, repaired when it says "running" but the
// run has ended: its terminal event is stored after the record's last
// change and no worker holds the run. (A worker that published the
// terminal event and then failed to update the index — a crash, a store
// error — leaves such a record; the next resubmission would otherwise be
// refused as in flight for ever.) Any doubt keeps the record as it is.
// record reads a run's record for a reply (NotFound for an unknown run),
// settled as settled says.
func (a *API) record(ctx context.Context, runID string) (store.RunRecord, error) {
	e, err := a.cfg.Store.Runs().Get(ctx, runID)
	if errors.Is(err, store.ErrRunNotFound) {
		return store.RunRecord{}, runNotFound(runID)
	}
	if err != nil {
		return store.RunRecord{}, err
	}
	return a.settled(ctx, e), nil
}

func (a *API) settled(ctx context.Context, e *store.RunEntry) store.RunRecord {
	rec := e.Record
	if rec.Status != store.RunRunning {
		return rec
	}
	last, err := a.pub.LastEvent(ctx, rec.RunID)
	if err != nil || last == nil || !last.IsTerminal() || !last.Stored.After(rec.UpdatedAt) {
		return rec
	}
	ev, err := last.Event()
	if err != nil {
		return rec
	}
	if owned, err := a.cfg.Store.Control().Owned(ctx, rec.RunID); err != nil || owned {
		return rec
	}
	fixed, err := a.cfg.Store.Runs().Modify(ctx, rec.RunID, lifecycle.Modify(func(r store.RunRecord) (store.RunRecord, error) {
		return lifecycle.Repair(r, ev, last.Stored)
	}))
	if err != nil {
		return rec
	}
	a.log.Info("run index repaired from the run's terminal event", "run_id", rec.RunID, "status", fixed.Record.Status)
	return fixed.Record
}

// dedupWindow is the RUNS stream's deduplication window (0 when it cannot
// be read).
func (a *API) dedupWindow(ctx context.Context) time.Duration {
	if d := a.dedup.Load(); d > 0 {
		return time.Duration(d)
	}
	s, err := a.js.Stream(ctx, a.names.RunsStream())
	if err != nil {
		return 0
	}
	d := s.CachedInfo().Config.Duplicates
	a.dedup.Store(int64(d))
	return d
}

// enqueue publishes the request of the submission e records to the RUNS
// stream, under a message id naming the run, the submission and the
// requeue (so the stream drops a repeat of the same publish), and, when
// record is set, records the request's stream sequence in e if no worker
// has claimed it yet.
//
// Without the sequence (record unset: a run's first submission, whose
// claim records it), a queued run's lost request is found as after a
// publisher that died before recording it (see requeue): exactly within
// the deduplication window, where publishing it again under the same
// message id is dropped if it landed; past half the window, by publishing
// it under a new id, a duplicate that the claim of the second copy
// terminates. Such a request also carries e's stamp (bus.HeaderRecord,
// see recordStamp): its first claim rebuilds e instead of reading it.
func (a *API) enqueue(ctx context.Context, req *bus.RunRequest, enc bus.Encoding, e *store.RunEntry, record bool) error {
	body, err := bus.Marshal(enc, req)
	if err != nil {
		return err
	}
	rec := &e.Record
	meta := bus.RequestMeta{RunID: req.RunID, ContentType: enc.ContentType(), Submission: max(rec.Submissions, 1), Trace: bus.TraceContextOf(ctx)}
	if rec.Requeues > 0 {
		meta.Suffix = ".requeue" + strconv.Itoa(rec.Requeues)
	}
	if !record {
		meta.Record = recordStamp(enc, body, req, e)
	}
	seq, err := a.pub.PublishRequest(ctx, req.Agent, body, meta)
	if err != nil {
		return fmt.Errorf("enqueue run %s: %w", req.RunID, err)
	}
	if !record || rec.RequestSeq == seq {
		return nil
	}
	// A compare-and-set: a worker that has claimed the request already
	// recorded its sequence (and changed the record) — nothing to add.
	next, err := lifecycle.RecordRequest(*rec, seq)
	if err != nil {
		return nil
	}
	e.Record = next
	if err := a.cfg.Store.Runs().Update(ctx, e); err != nil && !errors.Is(err, store.ErrConflict) {
		a.log.Warn("recording the run request's stream sequence failed; a loss of this request is noticed only within the deduplication window",
			"run_id", req.RunID, "seq", seq, "error", err)
	}
	return nil
}

// requeue publishes a queued run's request again when the runs stream has
// lost it (a publisher that died between indexing the run and publishing
// it, a request past the stream's max age, a purge): req, a resubmission
// of the same run, stands in for it.
//
// When the record names the request's stream sequence, the stream leader
// says whether it still holds it; if not, the record's requeue count goes
// up (a compare-and-set: one API instance wins) and the request is
// published under a new message id. Without a sequence (the publisher died
// before recording it), the request is published again under the same
// message id: within the deduplication window the stream drops it if the
// first publish landed; past it, a duplicate may be stored, and the worker
// that claims it second finds the submission in flight or ended and
// terminates it (HeaderSubmission).
func (a *API) requeue(ctx context.Context, e *store.RunEntry, req *bus.RunRequest, enc bus.Encoding) error {
	rec := e.Record
	if rec.RequestSeq == 0 {
		// Past half the dedup window (when it is known), a publish under
		// the first message id could be stored twice or dropped; count a
		// requeue and use a new id.
		if d := a.dedupWindow(ctx); d > 0 && time.Since(rec.UpdatedAt) >= d/2 {
			if !a.bumpRequeues(ctx, e) {
				return nil
			}
			return a.enqueue(ctx, req, enc, e, true)
		}
		// Within it, a publish under the first message id is dropped if
		// the first landed, and its ack names the first's sequence (now
		// recorded): checked below like a recorded one, so a request
		// removed from the stream since is published again.
		if err := a.enqueue(ctx, req, enc, e, true); err != nil {
			return err
		}
		if rec = e.Record; rec.RequestSeq == 0 {
			return nil
		}
	}
	stored, err := bus.RequestStored(ctx, a.js, a.names, rec.RequestSeq)
	if err != nil {
		a.log.Warn("could not check whether a queued run's request is still stored", "run_id", rec.RunID, "error", err)
		return nil
	}
	if stored {
		return nil
	}
	if !a.bumpRequeues(ctx, e) {
		return nil
	}
	a.log.Warn("a queued run's request was lost from the runs stream; publishing it again",
		"run_id", rec.RunID, "lost_seq", rec.RequestSeq, "requeues", e.Record.Requeues)
	return a.enqueue(ctx, req, enc, e, true)
}

// bumpRequeues counts a requeue in e's record if e is still current, and
// reports whether it did. When it did not, another API instance or a
// worker changed the record first (or the store failed: the client's next
// retry tries again), and the caller leaves the run alone.
func (a *API) bumpRequeues(ctx context.Context, e *store.RunEntry) bool {
	next, err := lifecycle.Requeue(e.Record)
	if err != nil {
		return false
	}
	e.Record = next
	err = a.cfg.Store.Runs().Update(ctx, e)
	if err != nil && !errors.Is(err, store.ErrConflict) {
		a.log.Warn("counting a requeue in the run index failed", "run_id", e.Record.RunID, "error", err)
	}
	return err == nil
}

func storedResult(r *store.RunRecord) *bus.StoredResult {
	res := &bus.StoredResult{Output: r.Result, Turns: r.Turns, FinalAgent: r.FinalAgent, FinishReason: r.FinishReason}
	if r.Usage != nil {
		res.Usage = *r.Usage
	}
	if res.FinalAgent == "" {
		res.FinalAgent = r.Agent
	}
	return res
}

// Status answers <p>.api.run.<id>.status.
func (a *API) Status(ctx context.Context, runID string) (*bus.StatusReply, error) {
	if err := bus.ValidateID("run_id", runID); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	r, err := a.record(ctx, runID)
	if err != nil {
		return nil, err
	}
	rep := &bus.StatusReply{RunID: r.RunID, Agent: r.Agent, SessionID: r.SessionID, Status: wireState(r.Status),
		Worker: r.Worker, Attempt: r.Attempt, Turns: r.Turns, Error: r.Error}
	if r.Status == store.RunCompleted {
		rep.Result = storedResult(&r)
	}
	if r.Status == store.RunParked && r.Parked != nil {
		rep.Awaiting = &bus.Awaiting{CallID: r.Parked.CallID, Deadline: r.Parked.Deadline}
	}
	if r.Status == store.RunQueued {
		rep.Waiting = a.waiting(ctx, r.Agent)
	}
	rep.RegistryRevision = r.Registry
	rep.ParentRunID = r.ParentRunID
	return rep, nil
}

// liveRun returns a run that exists; finished runs are an error for
// operations that need a live one when live is true.
func (a *API) liveRun(ctx context.Context, runID string, live bool) (*store.RunRecord, error) {
	if err := bus.ValidateID("run_id", runID); err != nil {
		return nil, err
	}
	e, err := a.cfg.Store.Runs().Get(ctx, runID)
	if errors.Is(err, store.ErrRunNotFound) {
		return nil, runNotFound(runID)
	}
	if err != nil {
		return nil, err
	}
	if live && e.Record.Status.Ended() {
		return nil, runEnded(runID, e.Record.Status)
	}
	return &e.Record, nil
}

// runEnded refuses a control of a run that has ended.
func runEnded(runID string, status store.RunStatus) error {
	return &bus.APIError{Type: bus.TypeInvalidRequest, Message: fmt.Sprintf("run %s is %s", runID, status),
		Hint: "resubmit the run (if_run_exists resume) to continue it"}
}

func (a *API) notify(runID string) {
	if err := a.cfg.Conn.Publish(a.names.Prefix()+".control."+runID, nil); err != nil {
		a.log.Debug("control notification failed (the owner will poll)", "run_id", runID, "error", err)
	}
}

// Approve persists a decision for a gated call.
func (a *API) Approve(ctx context.Context, runID string, req *bus.ApproveRequest) (*bus.ApproveReply, error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	if err := req.Validate(); err != nil {
		return nil, err
	}
	rec, err := a.liveRun(ctx, runID, false)
	if err != nil {
		return nil, err
	}
	// A decision already stored for the call answers a repeat as the
	// first was answered — accepted when it asks for the decision in
	// force — even once the run has moved on or ended: a client that lost
	// the first reply can send the decision again.
	if prev, err := a.cfg.Store.Control().Decision(ctx, runID, rec.Submissions, req.CallID); err != nil {
		return nil, err
	} else if prev != nil {
		same := prev.Decision == req.Decision && prev.Reason == req.Reason
		return &bus.ApproveReply{RunID: runID, CallID: req.CallID, Decision: prev.Decision, Reason: prev.Reason, Accepted: same}, nil
	}
	if rec.Status.Ended() {
		return nil, runEnded(runID, rec.Status)
	}
	if !a.awaits(ctx, rec, req.CallID) {
		return nil, notAwaited(runID, req.CallID)
	}
	d, created, err := a.cfg.Store.Control().Decide(ctx, runID, rec.Submissions, req.CallID, req.Decision, req.Reason)
	if err != nil {
		return nil, err
	}
	if !a.delivered(ctx, runID, rec.Submissions) {
		// The run ended and was submitted again meanwhile: the decision
		// belongs to the submission that ended.
		created = false
	}
	return &bus.ApproveReply{RunID: runID, CallID: req.CallID, Decision: d.Decision, Reason: d.Reason, Accepted: created}, nil
}

// delivered makes a control record just stored for the run's given
// submission reach the run: it notifies the run's owner, and wakes the run
// if it is parked. It reads the record after the store (from the stream
// leader): a run parking at this moment either is parked by then (and
// woken here) or looks for decisions and cancels once parked and wakes
// itself — each side writes before it reads, so one of them sees the
// other. It reports false when the run has moved on to a later
// submission, which ignores the record.
func (a *API) delivered(ctx context.Context, runID string, submission int) bool {
	a.notify(runID)
	e, err := a.cfg.Store.Runs().Get(ctx, runID)
	if err != nil {
		a.log.Warn("reading the run after storing a decision or cancel failed; the run's owner polls for it, and its approval deadline wakes it if parked", "run_id", runID, "error", err)
		return true
	}
	if max(e.Record.Submissions, 1) != max(submission, 1) {
		return false
	}
	if _, err := lifecycle.WakeEntry(ctx, a.js, a.names, a.cfg.Store, e); err != nil {
		a.log.Warn("waking a parked run failed; its approval deadline wakes it", "run_id", runID, "error", err)
	}
	return true
}

// Inject queues a steering message for the run's next turn. With
// req.Key set it is idempotent: a repeat answers the first inject's token.
func (a *API) Inject(ctx context.Context, runID string, req *bus.InjectRequest) (*bus.InjectReply, error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if len(req.Content) > a.cfg.MaxInputBytes {
		return nil, invalid("content", fmt.Sprintf("is %d bytes, over the %d-byte limit", len(req.Content), a.cfg.MaxInputBytes))
	}
	if _, err := a.liveRun(ctx, runID, true); err != nil {
		return nil, err
	}
	mb, err := a.cfg.Store.Mailbox(runID)
	if err != nil {
		return nil, err
	}
	var tok string
	if req.Key != "" {
		// One message per run and key, across gateways and retries.
		tok, err = mb.PushKey(ctx, req.Key, loop.MailMessage{Content: req.Content})
	} else {
		tok, err = mb.Push(ctx, loop.MailMessage{Content: req.Content})
	}
	if err != nil {
		return nil, err
	}
	a.notify(runID)
	return &bus.InjectReply{Token: tok}, nil
}

// Uninject withdraws a queued steering message.
func (a *API) Uninject(ctx context.Context, runID string, req *bus.UninjectRequest) (*bus.UninjectReply, error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if _, err := a.liveRun(ctx, runID, false); err != nil {
		return nil, err
	}
	mb, err := a.cfg.Store.Mailbox(runID)
	if err != nil {
		return nil, err
	}
	ok, err := mb.Remove(ctx, req.Token)
	if err != nil {
		return nil, err
	}
	return &bus.UninjectReply{Removed: ok}, nil
}

// Session returns a session's segments.
func (a *API) Session(ctx context.Context, sessionID string) (*bus.SessionReply, error) {
	if err := bus.ValidateID("session_id", sessionID); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	segs, err := a.cfg.Store.Session().Segments(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	rep := &bus.SessionReply{SessionID: sessionID, Segments: segs}
	le, err := a.cfg.Store.Session().Live(ctx, sessionID)
	switch {
	case err == nil:
		rep.LiveRunID = le.Slot.RunID
		for _, q := range le.Slot.Queue {
			var r struct {
				RunID string `json:"run_id"`
			}
			if json.Unmarshal(q, &r) == nil {
				rep.Queued = append(rep.Queued, r.RunID)
			}
		}
	case !errors.Is(err, store.ErrRunNotFound):
		return nil, err
	}
	if len(segs) == 0 && rep.LiveRunID == "" {
		// A session is its segments: one is stored as each run of it
		// completes.
		return nil, &bus.APIError{Type: bus.TypeNotFound, Message: "session " + sessionID + " not found",
			Hint: "check the id; a session holds a segment once a run submitted with its session_id has completed (lovia session ls lists the sessions, lovia runs list --session " + sessionID + " its runs)"}
	}
	for i, seg := range segs {
		sr := bus.SessionRun{RunID: seg.RunID}
		// The last sessionRunsShown runs' records are read (one read each).
		if i < len(segs)-sessionRunsShown {
			rep.Runs = append(rep.Runs, sr)
			continue
		}
		if e, err := a.cfg.Store.Runs().Get(ctx, seg.RunID); err == nil {
			sr.Status, sr.Turns = wireState(e.Record.Status), e.Record.Turns
			if e.Record.Usage != nil {
				sr.Usage = *e.Record.Usage
			}
		}
		rep.Runs = append(rep.Runs, sr)
	}
	return rep, nil
}

// Rewind keeps the first keep_entries entries of a session.
func (a *API) Rewind(ctx context.Context, sessionID string, req *bus.RewindRequest) (*bus.RewindReply, error) {
	if err := bus.ValidateID("session_id", sessionID); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	n, err := a.cfg.Store.Session().Rewind(ctx, sessionID, req.KeepEntries)
	if err != nil {
		return nil, err
	}
	return &bus.RewindReply{Removed: n}, nil
}

// Agents lists the catalog's agents (nil when this API has no catalog).
func (a *API) Agents() *bus.AgentsReply {
	if a.cfg.Catalog == nil {
		return nil
	}
	out := &bus.AgentsReply{Agents: a.cfg.Catalog.AgentInfos()}
	sort.Slice(out.Agents, func(i, j int) bool { return out.Agents[i].Name < out.Agents[j].Name })
	return out
}
