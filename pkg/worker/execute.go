package worker

import (
	"context"
	"errors"
	"time"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/lifecycle"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// execution is one claimed execution of a run: what the claim found and
// decided, and what the run and the settlement need.
type execution struct {
	d       *delivery
	req     *bus.RunRequest
	runID   string
	enc     bus.Encoding
	ag      *catalog.Agent
	ar      *activeRun
	plan    lifecycle.Plan
	holder  lifecycle.Holder
	last    *bus.StoredEvent
	rp      *bus.RunPublisher
	cleanup []func()
	// versions are the agent versions the run's first event tells.
	versions versions
}

// execute runs a valid request: claim → run → settle.
func (w *Worker) execute(ctx context.Context, d *delivery, req *bus.RunRequest, runID string, enc bus.Encoding, ag *catalog.Agent, rev uint64) {
	var wakeAfter bool // set by a park that must wake the run: done last
	defer func() {
		if wakeAfter {
			w.wakeNow(runID)
		}
	}()
	// The claim continues the trace of the request's submit; the run's
	// spans are its children.
	ctx, claimSpan := w.trace.startClaim(ctx, d, runID, ag.Name)
	defer claimSpan.End()
	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	ar := &activeRun{id: runID, seq: d.meta.Sequence.Stream, cancel: loop.NewCancelToken(), notify: make(chan struct{}, 1), stop: stopRun}
	unregister, ok := w.register(d, ar)
	if !ok {
		return
	}
	defer unregister()
	// Heartbeats keep the claim while the run lives.
	defer w.beats.add(d.msg, runID, ar)()

	x, v := w.claim(ctx, d, req, runID, enc, ag, ar, rev)
	w.trace.endClaim(claimSpan, x != nil, v)
	if x == nil {
		w.settleMsg(ctx, d, v)
		return
	}
	defer func() {
		for i := len(x.cleanup) - 1; i >= 0; i-- {
			x.cleanup[i]()
		}
	}()
	wakeAfter = w.run(ctx, runCtx, x)
}

// register records the execution in the worker's active runs. A
// redelivery of the request this worker is executing (its claim lapsed in
// a stall, or a takeover NAK sent on an older delivery's ack subject hit
// the live one — the server applies acks by stream sequence) must not
// start a second execution: the one in progress keeps the request alive
// with its heartbeats and acks it. An execution that is parking lets go of
// the run: the wake's claim (here, on the same worker) takes its place.
func (w *Worker) register(d *delivery, ar *activeRun) (unregister func(), ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	cur := w.active[ar.id]
	if cur != nil && cur.seq == ar.seq {
		d.log.Warn("request redelivered while this worker executes it; the execution in progress keeps it")
		return nil, false
	}
	unregister = func() {
		w.mu.Lock()
		if w.active[ar.id] == ar {
			delete(w.active, ar.id)
		}
		w.mu.Unlock()
	}
	if cur != nil && cur.parking.Load() == nil {
		// Another request of a run this worker executes: the claim
		// decides (it is in flight, or stale). One that wins it takes
		// the entry (see adopt).
		return unregister, true
	}
	w.active[ar.id] = ar
	return unregister, true
}

// adopt makes ar, whose claim just won, the run's entry in the active
// runs, in place of another request's execution of the same run that was
// registered first (a stale copy of the request, still being turned away):
// holder pings and control notifications must find the execution the run
// index names. A control notification since the claim may have gone to
// the other one, or nowhere: ar then counts as notified (a quiet claim
// reads its cancel and mailbox after all).
func (w *Worker) adopt(ar *activeRun) {
	w.mu.Lock()
	if w.active[ar.id] != ar {
		ar.controlSeen.Store(true)
		w.active[ar.id] = ar
	}
	w.mu.Unlock()
}

// claim reads what the run has (its checkpoint, its last event), decides
// what the delivery is (lifecycle.Decide) and, for a run to execute, makes
// the claim transition and opens its publisher. It returns the execution,
// or nil and how to settle the delivery.
func (w *Worker) claim(ctx context.Context, d *delivery, req *bus.RunRequest, runID string, enc bus.Encoding, ag *catalog.Agent, ar *activeRun, rev uint64) (*execution, lifecycle.Verdict) {
	c := lifecycle.Claim{
		Worker: w.cfg.ID, Seq: d.meta.Sequence.Stream, Continues: bus.HeaderUint(d.msg.Headers(), bus.HeaderContinues),
		Now: w.cfg.Clock(), Registry: rev, Submission: int(bus.HeaderUint(d.msg.Headers(), bus.HeaderSubmission)),
	}
	w.versionClaim(&c, d, ag)
	// A run no worker has ever claimed (attempt 0, queued: the API's
	// record, or the sweep's; or no record at all for a raw publish) has
	// no checkpoint and no events: claim it on its record, without
	// reading them — on the record the API stamped a first request with,
	// rebuilt without a read (stampedEntry), on a record a raw publish's
	// first claim creates, or on the record read here. A request the
	// record refuses for good (another request runs the run) is
	// terminated on that read. Anything else — or a lost compare-and-set
	// — takes the whole path below. (Not when run records expire before
	// events do: a run id indexed anew could have an earlier
	// incarnation's events; see fastClaims.)
	if !w.fastClaims {
		return w.claimSlow(ctx, d, req, runID, enc, ag, ar, c)
	}
	if e := stampedEntry(d, req); e != nil {
		if x, v, err := w.claimOn(ctx, d, req, runID, enc, ag, ar, c, e); err == nil {
			return x, v
		}
	} else if rawFirst(d, c) {
		// A raw publish's first delivery: its run is indexed by its claim,
		// so a run without a record has never been claimed. Create the
		// record claimed, without reading first; a record that exists (an
		// earlier submission, the sweep's queued record, a duplicate
		// request) fails the create, and the claim reads it.
		rec, cl := lifecycle.ClaimNew(c, runID, ag.Name, req.SessionID, req.Metadata)
		if e, err := w.st.Runs().Create(ctx, rec); err == nil {
			// Quiet: the API stores a cancel or a steer only for a run
			// with a record, and one stored from now on notifies ar. (A
			// program writing to the store itself may store them for a
			// run without a record, Control.RequestCancel and
			// Mailbox.Push allow it: the run then finds them at its
			// first cancel poll or mailbox recheck, not at its start.)
			return w.claimedNew(ctx, d, req, runID, enc, ag, ar, e, true, cl)
		}
	}
	// A compare-and-set lost to another writer (a cancel or an inject
	// clearing the record's quiet flag, a requeue) reads the record again
	// once.
	for range 2 {
		e, err := w.st.Runs().Get(ctx, runID)
		if err != nil {
			break
		}
		if !lifecycle.Unclaimed(e.Record) {
			// Claimed before (or ended by the API's cancel, or refused:
			// it has events). Refused for good (another request of the
			// run is running it: a duplicate raw publish, one racing the
			// API's)? Say so now: the whole path would say the same after
			// reading the checkpoint and the last event, by when the other
			// request may have ended the run — and a raw publish of an
			// ended run is a new submission of it. (A never-claimed
			// record's refusal comes from claimOn's own transition.)
			if _, _, err := lifecycle.ClaimRun(e.Record, c); err != nil {
				if v, refused := refusedClaim(d, runID, c, err); refused {
					return nil, v
				}
			}
			break
		}
		x, v, err := w.claimOn(ctx, d, req, runID, enc, ag, ar, c, e)
		if err == nil {
			return x, v
		}
		if !errors.Is(err, store.ErrConflict) {
			break
		}
	}
	return w.claimSlow(ctx, d, req, runID, enc, ag, ar, c)
}

// stampedEntry is the record the API created for the first delivery of
// a request that names it (bus.HeaderRecord), rebuilt from the request
// and the stamp's creation time (lifecycle.Submitted, what the API's
// create stored) at the stamp's revision, without reading it; nil for a
// request without a stamp, or a redelivery (its record may have changed).
// A record changed since the API wrote it (a cancel or an inject cleared
// its quiet flag, a requeue, a resubmission) fails the claim's
// compare-and-set, and the claim reads it.
func stampedEntry(d *delivery, req *bus.RunRequest) *store.RunEntry {
	if !d.firstClaim {
		return nil
	}
	stamp, ok := bus.RecordStampOf(d.msg.Headers())
	if !ok {
		return nil
	}
	// Stored in one piece (the API stamps no other record): an entry with
	// no chunks to clean up when it is replaced.
	return &store.RunEntry{Record: lifecycle.Submitted(lifecycle.SubmissionOf(req), stamp.Created), Revision: stamp.Revision}
}

// claimOn makes the claim transition on e, a record no worker has
// claimed, with a compare-and-set at its revision, and finishes the claim
// of a never-claimed run; an error (a refused transition, a lost
// compare-and-set) leaves the delivery unclaimed.
func (w *Worker) claimOn(ctx context.Context, d *delivery, req *bus.RunRequest, runID string, enc bus.Encoding, ag *catalog.Agent, ar *activeRun, c lifecycle.Claim, e *store.RunEntry) (*execution, lifecycle.Verdict, error) {
	quiet := e.Record.Quiet
	next, cl, err := lifecycle.ClaimRun(e.Record, c)
	if err != nil {
		return nil, lifecycle.Verdict{}, err
	}
	e.Record = next
	if err := w.st.Runs().Update(ctx, e); err != nil {
		return nil, lifecycle.Verdict{}, err
	}
	x, v := w.claimedNew(ctx, d, req, runID, enc, ag, ar, e, quiet, cl)
	return x, v, nil
}

// rawFirst reports whether c is the first claim of a raw publish's
// request (no Lovia-Submission, no Lovia-Continues: the API's and the
// workers' requests carry one or the other, or a record stamp).
func rawFirst(d *delivery, c lifecycle.Claim) bool {
	return d.firstClaim && c.Submission == 0 && c.Continues == 0
}

// claimedNew finishes the claim of a never-claimed run, whose claim wrote
// e: it has no checkpoint and no event to read.
func (w *Worker) claimedNew(ctx context.Context, d *delivery, req *bus.RunRequest, runID string, enc bus.Encoding, ag *catalog.Agent, ar *activeRun, e *store.RunEntry, quiet bool, cl lifecycle.Claimed) (*execution, lifecycle.Verdict) {
	d.fresh, d.unclaimed, d.quiet, d.entry = true, true, quiet, e
	plan := lifecycle.Decide(lifecycle.Delivery{FirstClaim: d.firstClaim})
	return w.claimed(ctx, d, req, runID, enc, ag, ar, plan, nil, cl)
}

// claimSlow is claim for a run that may have run before: it reads the
// run's checkpoint and last event first.
func (w *Worker) claimSlow(ctx context.Context, d *delivery, req *bus.RunRequest, runID string, enc bus.Encoding, ag *catalog.Agent, ar *activeRun, c lifecycle.Claim) (*execution, lifecycle.Verdict) {
	log := d.log
	snap, err := w.st.Checkpointer().Load(ctx, runID)
	if err != nil && !errors.Is(err, loop.ErrNoSnapshot) {
		log.Warn("checkpoint load failed; releasing the run", "error", err)
		return nil, lifecycle.Verdict{Settle: lifecycle.Nak, Delay: time.Second}
	}
	last, err := w.lastEvent(ctx, runID)
	if err != nil {
		log.Warn("reading the run's last event failed; releasing the run", "error", err)
		return nil, lifecycle.Verdict{Settle: lifecycle.Nak, Delay: time.Second}
	}
	seq, continues := c.Seq, c.Continues
	// Events stored after this request was: this submission's own.
	d.published = ofRequest(last, seq, d.meta.Timestamp)
	if continues != 0 && !d.published {
		// A parked run's resume request: the parking claim's events are
		// this submission's.
		d.published = ofRequest(last, continues, time.Time{})
		d.continued = d.published
	}
	plan := lifecycle.Decide(lifecycle.Delivery{
		FirstClaim: d.firstClaim, Published: d.published, LastTerminal: last != nil && last.IsTerminal(),
		SnapshotCompleted: snap != nil && snap.Status == loop.StatusCompleted,
		Restart:           req.IfRunExists == bus.IfExistsRestart,
	})
	d.fresh = plan.Fresh
	switch plan.Action {
	case lifecycle.AckEnded:
		log.Info("redelivered request of a run that already ended; acknowledging it")
		if ev, err := last.Event(); err == nil {
			// The crash may have come before the index learnt the outcome.
			w.indexOutcome(ctx, d, runID, ev)
		}
		return nil, lifecycle.Verdict{Settle: lifecycle.Ack}
	case lifecycle.Heal:
		w.healReplay(ctx, d, req, runID, ag)
		return nil, lifecycle.Verdict{Settle: lifecycle.Ack}
	}

	// Index: claim the run. A delivery that finds the run running under
	// another request is a duplicate (a raw publish under a different
	// Nats-Msg-Id, or racing the API's): it must not start a second
	// execution, whose events would interleave with the first's.
	var (
		claimed lifecycle.Claimed
		holder  lifecycle.Holder
		started string // the version the run started on, when refused for it
	)
	claimFn := func(r *store.RunRecord) error {
		next, cl, err := lifecycle.ClaimRun(*r, c)
		if err != nil {
			holder, started = lifecycle.Holder{Worker: r.Worker, Attempt: r.Attempt}, r.Version
			return err
		}
		*r, claimed = next, cl
		return nil
	}
	_, err = w.st.Runs().Modify(ctx, runID, claimFn)
	if errors.Is(err, lifecycle.ErrHeld) {
		// Another worker holds the run: a redelivery the server made while
		// it lives (a NATS restart, a leader change) must not start a
		// second execution. Its holder keeps the request alive with its
		// heartbeats (they apply by stream sequence) and acks it.
		switch w.holds(ctx, holder.Worker, runID, seq) {
		case holderHolds:
			log.Warn("request delivered again while another worker executes it; leaving it to that worker", "holder", holder.Worker)
			w.m.fenced.Inc()
			return nil, lifecycle.Verdict{Settle: lifecycle.Leave}
		case holderAway:
			// No answer, but the holder is in the fleet still: it may be
			// reconnecting (after a NATS restart every worker is away for
			// a moment). Ask again after the reconnect grace.
			log.Info("the worker holding the run does not answer but is still in the fleet; asking again later", "holder", holder.Worker)
			return nil, lifecycle.Verdict{Settle: lifecycle.Nak, Delay: w.cfg.ReconnectGrace}
		}
		c.Gone = &holder
		_, err = w.st.Runs().Modify(ctx, runID, claimFn)
	}
	if errors.Is(err, lifecycle.ErrOtherVersion) {
		if v, back := w.giveBack(ctx, d, ag.Name, started, c.Version, holder.Worker); back {
			return nil, v
		}
		c.VersionAbsent = started
		_, err = w.st.Runs().Modify(ctx, runID, claimFn)
	}
	if errors.Is(err, store.ErrRunNotFound) {
		// A raw publish: index it now.
		rec, cl := lifecycle.ClaimNew(c, runID, ag.Name, req.SessionID, req.Metadata)
		_, err = w.st.Runs().Create(ctx, rec)
		if errors.Is(err, store.ErrRunExists) {
			// Indexed meanwhile (the API, another raw publish): claim it
			// as any other.
			_, err = w.st.Runs().Modify(ctx, runID, claimFn)
		} else if err == nil {
			claimed = cl
		}
	}
	if v, refused := refusedClaim(d, runID, c, err); refused {
		return nil, v
	}
	if err != nil {
		log.Warn("run index update failed; releasing the run", "error", err)
		return nil, lifecycle.Verdict{Settle: lifecycle.Nak, Delay: time.Second}
	}
	return w.claimed(ctx, d, req, runID, enc, ag, ar, plan, last, claimed)
}

// refusedClaim is the verdict on a request whose claim transition was
// refused with err for good (lifecycle.ErrInFlight, ErrStale): terminate
// it without running it; refused is false for any other err.
func refusedClaim(d *delivery, runID string, c lifecycle.Claim, err error) (v lifecycle.Verdict, refused bool) {
	switch {
	case errors.Is(err, lifecycle.ErrInFlight):
		d.log.Info("duplicate request of a run in flight; terminated without running it")
		return lifecycle.Verdict{Settle: lifecycle.Term, Reason: "duplicate: run " + runID + " is already running"}, true
	case errors.Is(err, lifecycle.ErrStale):
		d.log.Info("request of a submission that has ended or been superseded; terminated without running it", "submission", c.Submission)
		return lifecycle.Verdict{Settle: lifecycle.Term, Reason: "stale: a request of an earlier submission of run " + runID}, true
	}
	return lifecycle.Verdict{}, false
}

// claimed finishes a claim: the registry revision's agent, the ownership
// record and the event publisher, which continues after last (nil: the
// run has no event yet).
func (w *Worker) claimed(ctx context.Context, d *delivery, req *bus.RunRequest, runID string, enc bus.Encoding, ag *catalog.Agent, ar *activeRun, plan lifecycle.Plan, last *bus.StoredEvent, claimed lifecycle.Claimed) (*execution, lifecycle.Verdict) {
	log := d.log
	seq := d.meta.Sequence.Stream
	w.adopt(ar)
	ar.submission.Store(int64(claimed.Submission))
	if d.fresh && d.firstClaim {
		w.m.queueWait.WithLabelValues(ag.Name).Observe(time.Since(d.meta.Timestamp).Seconds())
	}
	x := &execution{d: d, req: req, runID: runID, enc: enc, ag: ag, ar: ar, plan: plan, last: last,
		holder:   lifecycle.Holder{Worker: w.cfg.ID, Attempt: claimed.Attempt},
		versions: versions{version: w.versionOf(ag), started: claimed.StartedVersion, previous: claimed.PreviousVersion}}
	if err := w.pinned(ctx, x, claimed.Registry); err != nil {
		// The definitions the run started with cannot be read now (a
		// store outage): running the current ones would mix versions.
		log.Warn("the agents of the run's pinned registry revision cannot be built; releasing the run", "revision", claimed.Registry, "error", err)
		w.release(ctx, x, w.cfg.ReconnectGrace, "its pinned agents are unavailable")
		return nil, lifecycle.Verdict{Settle: lifecycle.Leave}
	}
	// The last event was just read from the stream leader: the publisher
	// continues after it without asking again.
	var lastSeq uint64
	if last != nil {
		lastSeq = last.HighSeq
	}
	if claimed.ParkedLastSeq > lastSeq {
		// The run's events expired while it was parked (the events
		// stream's max age): it still continues its submission, after the
		// seq it had reached.
		lastSeq, d.published, d.continued = claimed.ParkedLastSeq, true, true
		log.Warn("the run's events expired while it was parked; its events continue after the last seq it published", "last_seq", claimed.ParkedLastSeq)
	}
	rp, err := w.pub.Resume(runID, enc, lastSeq)
	if err != nil {
		log.Warn("event publisher open failed; releasing the run", "error", err)
		w.release(ctx, x, time.Second, "opening the event publisher failed")
		return nil, lifecycle.Verdict{Settle: lifecycle.Leave}
	}
	rp.SetRequest(seq)
	rp.SetTrace(bus.TraceContextOf(ctx)) // the claim's
	x.rp = rp
	// Last, once nothing can drop x: its clean-up clears the record.
	w.own(x)
	return x, lifecycle.Verdict{}
}

// own lists the claimed delivery in this worker's holdings record (the
// takeover reaper of every other worker watches it; see holdings). The
// claim does not wait for the write, and the run's clean-up drops the
// entry, which leaves the record with the next write. A redelivered run's
// earlier holder may still list it: a reaper checks the run's record, which
// this claim changed, before it releases a listed run.
func (w *Worker) own(x *execution) {
	d := x.d
	ack := d.msg.Reply()
	if ack == "" || w.hold == nil {
		return
	}
	drop := w.hold.add(store.Holding{RunID: x.runID, Ack: ack, Seq: d.meta.Sequence.Stream, Attempt: x.holder.Attempt})
	x.cleanup = append(x.cleanup, drop)
}

// run executes a claimed run with the loop, publishing its events, then
// parks or settles it. It reports whether the run parked and must be woken
// at once.
func (w *Worker) run(ctx, runCtx context.Context, x *execution) (wakeAfter bool) {
	w.m.inFlight.Inc()
	defer w.m.inFlight.Dec()
	d := x.d
	// A quiet claim (see delivery.quiet) has no cancel to read; a
	// notification after it is applied by onControl (the submission is
	// set by now), one before it set controlSeen.
	quiet := d.quiet && !x.ar.controlSeen.Load()
	if !quiet {
		w.applyCancel(ctx, x.runID, x.ar)
	}
	var lastEnv *bus.Envelope
	if x.last != nil {
		lastEnv = x.last.Envelope
	}
	sink := &eventSink{w: w, d: d, rp: x.rp, runID: x.runID, agent: x.ag.Name, attempt: x.holder.Attempt, last: lastEnv, replay: x.plan.Replay, coalesce: w.cfg.CoalesceDeltas,
		parent: bus.ParentRunID(x.req.Metadata), pubCtx: context.WithoutCancel(ctx), versions: x.versions}
	opts, err := w.runOptions(x.req, x.runID, x.ag, x.ar, sink, d.fresh, d.unclaimed, quiet)
	if err != nil {
		w.finishPoison(ctx, d, x.rp, x.runID, x.ag.Name, err)
		return false
	}
	h := w.runner.Stream(runCtx, x.ag.Agent, x.req.Input.Entries(), opts...)
	for ev := range h.Events() {
		if !sink.publish(ctx, ev) {
			break
		}
	}
	sink.close()
	res, runErr := h.Result()
	if p := x.ar.parking.Load(); p != nil && !sink.terminal && !sink.fenced && sink.err == nil &&
		!errors.Is(runErr, loop.ErrFenced) && w.runCtx.Err() == nil {
		return w.park(ctx, x, p)
	}
	w.settle(ctx, x, sink, res, runErr)
	return false
}
