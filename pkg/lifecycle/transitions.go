package lifecycle

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// The states of a run, as the run index stores them.
const (
	Queued    = store.RunQueued
	Running   = store.RunRunning
	Parked    = store.RunParked
	Completed = store.RunCompleted
	Failed    = store.RunFailed
)

// States lists every state, in the order of the table in the package doc.
func States() []store.RunStatus {
	return []store.RunStatus{Queued, Running, Parked, Completed, Failed}
}

// Submission describes a run the API accepts for the first time.
type Submission struct {
	RunID, Agent, SessionID string
	Metadata                map[string]any
	// InputDigest is InputDigest of the request's input.
	InputDigest string
}

// Submit is the record of a new run: queued, its first submission.
func Submit(s Submission) store.RunRecord {
	r := store.RunRecord{
		RunID: s.RunID, Agent: s.Agent, SessionID: s.SessionID, Status: Queued,
		Metadata: s.Metadata, Submissions: 1, ParentRunID: bus.ParentRunID(s.Metadata), Quiet: true,
		InputDigest: s.InputDigest,
	}
	r.AddAttempt(store.StepSubmit, "", time.Time{})
	return r
}

// SubmissionOf is the submission a run request describes: the API indexes
// a first request's run with it, and the request's claim rebuilds that
// record from it (see Submitted).
func SubmissionOf(req *bus.RunRequest) Submission {
	return Submission{RunID: req.RunID, Agent: req.Agent, SessionID: req.SessionID, Metadata: req.Metadata, InputDigest: InputDigest(req.Input)}
}

// InputDigest identifies a run input: the hex SHA-256 (its first 16
// bytes) of its messages' roles and contents, a string being one user
// message; "" for no input. Two inputs with the same digest give the run
// the same transcript.
func InputDigest(in bus.Input) string {
	msgs := in.Messages
	if !in.IsList() {
		if in.IsZero() {
			return ""
		}
		msgs = []bus.InputMessage{{Role: "user", Content: in.Text}}
	}
	if len(msgs) == 0 {
		return ""
	}
	h := sha256.New()
	for _, m := range msgs {
		_, _ = fmt.Fprintf(h, "%d:%s%d:%s", len(m.Role), m.Role, len(m.Content), m.Content)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Submitted is the record store.Runs.Create stores for Submit(s) when it
// creates it at created (the CreatedAt it returns): the claim of a first
// request rebuilds the record the API wrote from the request and that
// time (bus.HeaderRecord), and compare-and-sets it without reading it.
func Submitted(s Submission, created time.Time) store.RunRecord {
	return store.Created(Submit(s), created)
}

// Unrouted is the record of a run a raw publish queued for an agent no
// worker serves, found in the runs stream at seq: queued, under that
// request, with no submission stated (like the raw publish itself).
func Unrouted(s Submission, seq uint64) store.RunRecord {
	r := Submit(s)
	r.Submissions, r.RequestSeq, r.Quiet = 0, seq, false
	return r
}

// Resubmit starts a new submission of an ended run: queued again, with the
// last submission's outcome, request and requeues cleared. Cancels,
// decisions and approval deadlines are stamped with their submission, so
// the new one starts without them. A run that has not ended is refused
// with ErrNotEnded: its submission is still in flight.
func Resubmit(r store.RunRecord) (store.RunRecord, error) {
	if !r.Status.Ended() {
		return r, refuse("resubmit", r, ErrNotEnded)
	}
	// A run a raw publish created counts as submission 1.
	r.Submissions = max(r.Submissions, 1) + 1
	r.Status, r.Error, r.Result, r.Usage = Queued, nil, nil, nil
	r.RequestSeq, r.Requeues, r.Registry = 0, 0, 0
	r.AddAttempt(store.StepResubmit, "", time.Time{})
	return r, nil
}

// RecordRequest records the stream sequence of the request the API just
// published for a queued run. A run a worker has claimed meanwhile (it
// records the sequence itself) is refused with ErrNotQueued.
func RecordRequest(r store.RunRecord, seq uint64) (store.RunRecord, error) {
	if r.Status != Queued {
		return r, refuse("record request", r, ErrNotQueued)
	}
	r.RequestSeq = seq
	return r, nil
}

// Requeue counts a publish of a queued run's request under a new message
// id, after the runs stream lost the last one.
func Requeue(r store.RunRecord) (store.RunRecord, error) {
	if r.Status != Queued {
		return r, refuse("requeue", r, ErrNotQueued)
	}
	r.Requeues++
	r.RequestSeq = 0
	r.AddAttempt(store.StepRequeue, "", time.Time{})
	return r, nil
}

// Claim is a worker's claim of a delivered run request.
type Claim struct {
	// Worker is the claiming worker's id.
	Worker string
	// Seq is the runs-stream sequence of the delivered request.
	Seq uint64
	// Submission is the request's stated submission (Lovia-Submission;
	// 0 for a raw publish, which states none).
	Submission int
	// Continues is the sequence of the request a wake request continues
	// (Lovia-Continues; 0 for any other request).
	Continues uint64
	// Now is the claim's time.
	Now time.Time
	// Gone names the holder the claimer found no longer executes the run
	// (it answered that it does not hold it, or it is gone from the
	// fleet). A claim of a run running on another worker is refused with
	// ErrHeld unless the record's holder is this one: after a NATS restart
	// or a leader change the server may deliver a request again, as a
	// first delivery, while its holder is alive and well — and a holder
	// found gone a moment ago may have been replaced by a live one since.
	Gone *Holder
	// Registry is the claimer's current agents-registry revision (0 for a
	// fixed agents file): a submission's first claim pins it.
	Registry uint64
	// Version is the claimer's version of the run's agent
	// (catalog.VersionOf; "" for none): a submission's first claim
	// records it as the version the run started on, every claim step
	// records it as the claimer's.
	Version string
	// RouteVersions refuses, with ErrOtherVersion, the resume (or
	// takeover) of a run that started on another version than Version,
	// unless VersionAbsent names that version: the claimer found no live
	// worker of it.
	RouteVersions bool
	// VersionAbsent is the version the claimer found no live worker of.
	VersionAbsent string
}

// Claimed is what a successful claim tells the claimer.
type Claimed struct {
	// Attempt is the claim's attempt, the token of the holder's later
	// transitions (park, release, finish).
	Attempt int
	// Submission is the run's current submission (at least 1).
	Submission int
	// ParkedLastSeq is the seq of the run's last event when the park this
	// wake request ends began (0 for any other claim): the run continues
	// after it even if its events expired while it was parked.
	ParkedLastSeq uint64
	// Registry is the agents-registry revision the submission is pinned
	// to (0: none; the claimer's own agents).
	Registry uint64
	// StartedVersion is the agent version the submission started on (""
	// when unknown), and PreviousVersion the version of the claim before
	// this one ("" when there was none, or it gave none).
	StartedVersion, PreviousVersion string
}

// ClaimNew is the record of a run a raw publish started (no API indexed
// it): running under the claim, its first attempt.
func ClaimNew(c Claim, runID, agent, sessionID string, metadata map[string]any) (store.RunRecord, Claimed) {
	r := store.RunRecord{
		RunID: runID, Agent: agent, SessionID: sessionID, Status: Running,
		Worker: c.Worker, Attempt: 1, Metadata: metadata, StartedAt: c.Now.UTC(), RequestSeq: c.Seq, Registry: c.Registry,
		ParentRunID: bus.ParentRunID(metadata),
	}
	r.Version = c.Version
	r.AddClaimStep(store.StepClaim, c.Worker, c.Version, c.Now)
	return r, Claimed{Attempt: 1, Submission: 1, Registry: c.Registry, StartedVersion: c.Version}
}

// ClaimRun makes the claiming worker the run's holder. It refuses, with
// ErrStale, a request whose submission has ended under another request or
// been superseded (see [IsStale]); with ErrInFlight, a request of a run
// that is running or parked under another request (see [IsInFlight]); and
// with ErrHeld, the run's own request while another worker holds it,
// unless the claimer established that this very holder is gone
// (Claim.Gone).
// A raw publish of an ended run is a new submission of it.
func ClaimRun(r store.RunRecord, c Claim) (store.RunRecord, Claimed, error) {
	if IsStale(r, c.Submission, c.Seq) {
		return r, Claimed{}, refuse("claim", r, ErrStale)
	}
	if IsInFlight(r, c.Seq, c.Continues) {
		return r, Claimed{}, refuse("claim", r, ErrInFlight)
	}
	if r.Status == Running && r.Worker != c.Worker && (c.Gone == nil || !c.Gone.Holds(r)) {
		return r, Claimed{}, refuse("claim", r, ErrHeld)
	}
	kind := claimKind(r)
	if kind != store.StepClaim && c.RouteVersions && OtherVersion(r, c.Version) && c.VersionAbsent != r.Version {
		return r, Claimed{}, refuse("claim", r, ErrOtherVersion)
	}
	var out Claimed
	if r.Parked != nil && c.Continues != 0 && c.Continues == r.Parked.Continues {
		out.ParkedLastSeq = r.Parked.LastSeq
		if r.Status == Parked {
			// The wake's claim came before its waker's record update
			// (which now fails its compare-and-set): count the wake here.
			r.Wakes++
			r.AddAttempt(store.StepWake, "", c.Now)
		}
	}
	if c.Submission == 0 && r.Status.Ended() {
		// It starts without the last submission's cancel and decisions,
		// and with the current agents.
		r.Submissions = max(r.Submissions, 1) + 1
		r.Registry = 0
	}
	if r.Registry == 0 {
		r.Registry = c.Registry
	}
	out.PreviousVersion = lastClaimVersion(r)
	if kind == store.StepClaim {
		// A submission's first claim: the version it starts on.
		r.Version = c.Version
	}
	r.Attempt++
	r.Status, r.Worker, r.Error, r.RequestSeq, r.Parked, r.Quiet = Running, c.Worker, nil, c.Seq, nil, false
	if r.StartedAt.IsZero() {
		r.StartedAt = c.Now.UTC()
	}
	r.AddClaimStep(kind, c.Worker, c.Version, c.Now)
	out.Attempt, out.Submission, out.Registry, out.StartedVersion = r.Attempt, max(r.Submissions, 1), r.Registry, r.Version
	return r, out, nil
}

// OtherVersion reports whether run r started on an agent version other
// than version; false when either is unknown ("").
func OtherVersion(r store.RunRecord, version string) bool {
	return r.Version != "" && version != "" && r.Version != version
}

// lastClaimVersion is the version of r's last claim step ("" when it has
// none in its history, or it gave none).
func lastClaimVersion(r store.RunRecord) string {
	for i := len(r.Attempts) - 1; i >= 0; i-- {
		switch r.Attempts[i].Kind {
		case store.StepClaim, store.StepResume, store.StepTakeover:
			return r.Attempts[i].Version
		}
	}
	return ""
}

// claimKind names the step of a claim of r: the takeover of a run another
// holder was running, the resume of a run under way (released, woken, or
// parked and claimed by its wake), or a submission's first claim.
func claimKind(r store.RunRecord) string {
	switch {
	case r.Status == Running:
		return store.StepTakeover
	case r.Status == Parked:
		return store.StepResume
	case r.Status.Ended():
		return store.StepClaim
	}
	if r.Attempt == 0 {
		return store.StepClaim
	}
	// The step before any requeues says whether the submission has been
	// claimed since it began.
	i := len(r.Attempts) - 1
	for i >= 0 && r.Attempts[i].Kind == store.StepRequeue {
		i--
	}
	if i >= 0 && (r.Attempts[i].Kind == store.StepSubmit || r.Attempts[i].Kind == store.StepResubmit) {
		return store.StepClaim
	}
	return store.StepResume
}

// IsInFlight reports whether run r is being executed, or waits parked for
// a decision, under another request than the one stored at seq (stating
// it continues the request stored at continues). A running run is claimed
// again only by a redelivery of its own request (a takeover); a parked run
// only by the wake of the park in place, or by a redelivery of the request
// that parked it.
func IsInFlight(r store.RunRecord, seq, continues uint64) bool {
	switch r.Status {
	case Running:
		return seq != r.RequestSeq
	case Parked:
		return r.Parked == nil || (continues != r.Parked.Continues && seq != r.Parked.Continues)
	}
	return false
}

// IsStale reports whether the request stored at seq, of the stated
// submission (0 when the publisher did not say), is not run r's current
// one: it belongs to an earlier submission, or it is a second request of
// the current submission, which has ended under another. Raw publishes
// state no submission and are never stale by submission.
//
// Whatever the request says, one stored before the request the run index
// last recorded has been superseded: a parked run's parking request
// redelivered after the wake's claim, a request the API judged lost and
// replaced.
func IsStale(r store.RunRecord, submission int, seq uint64) bool {
	switch {
	case r.RequestSeq != 0 && seq < r.RequestSeq:
		return true
	case CancelledUnheld(r) && (seq == r.RequestSeq || submission != 0 && submission <= max(r.Submissions, 1)):
		// Every request of the submission a cancel ended with no worker
		// holding it: those stored before the cancel, and the ones a
		// requeue or a wake racing it stored after.
		return true
	case submission == 0:
		return false
	case submission < r.Submissions:
		return true
	}
	return submission == r.Submissions && r.Status.Ended() && r.RequestSeq != 0 && r.RequestSeq != seq
}

// Holder names the claim a transition is made under: the worker and the
// attempt its claim returned.
type Holder struct {
	Worker  string
	Attempt int
}

// Holds reports whether h is run r's current claim.
func (h Holder) Holds(r store.RunRecord) bool {
	return r.Worker == h.Worker && r.Attempt == h.Attempt
}

// Park parks a running run on a gated call: it waits for a decision on no
// worker, and p holds the request that resumes it. Only the run's holder
// parks it (ErrNotHolder otherwise).
func Park(r store.RunRecord, h Holder, p store.Parking) (store.RunRecord, error) {
	if r.Status != Running || !h.Holds(r) {
		return r, refuse("park", r, ErrNotHolder)
	}
	r.Status, r.Parked = Parked, &p
	r.AddAttempt(store.StepPark, h.Worker, time.Time{})
	return r, nil
}

// Wake queues a parked run again: its resume request was published at
// seq. The parking stays on the record until the wake's claim, which
// continues after its LastSeq. A run that is not parked is refused with
// ErrNotParked (woken already, or claimed).
func Wake(r store.RunRecord, seq uint64) (store.RunRecord, error) {
	if r.Status != Parked || r.Parked == nil {
		return r, refuse("wake", r, ErrNotParked)
	}
	r.Status, r.RequestSeq = Queued, seq
	r.Wakes++
	r.AddAttempt(store.StepWake, "", time.Time{})
	return r, nil
}

// Release gives a running run's claim back (a shutdown, an interruption,
// a transient failure, the takeover of a dead worker): it is queued again
// and its request, released to the stream, resumes it on any worker. Only
// the holder's claim is released (ErrNotHolder otherwise).
func Release(r store.RunRecord, h Holder) (store.RunRecord, error) {
	if r.Status != Running || !h.Holds(r) {
		return r, refuse("release", r, ErrNotHolder)
	}
	r.Status = Queued
	r.AddAttempt(store.StepRelease, h.Worker, time.Time{})
	return r, nil
}

// Finish records a run's terminal event (a *loop.RunCompleted or a
// *loop.RunFailed) as its outcome, finished at now. A completed run is
// never failed afterwards (ErrEnded); any other event is refused with
// ErrNotTerminal.
func Finish(r store.RunRecord, ev loop.Event, now time.Time) (store.RunRecord, error) {
	switch ev.(type) {
	case *loop.RunCompleted:
	case *loop.RunFailed:
		if r.Status == Completed || CancelledUnheld(r) {
			// A run cancelled with no holder keeps that outcome: its
			// run_failed is the API's (and IsStale needs the step).
			return r, refuse("finish", r, ErrEnded)
		}
	default:
		return r, refuse("finish", r, ErrNotTerminal)
	}
	r.ApplyTerminal(ev, now.UTC())
	r.AddAttempt(outcomeStep(ev), "", now)
	return r, nil
}

// outcomeStep is the history step of a terminal event.
func outcomeStep(ev loop.Event) string {
	if _, ok := ev.(*loop.RunCompleted); ok {
		return store.StepComplete
	}
	return store.StepFail
}

// CancelUnheld ends, on a cancel request, a run that no worker holds —
// queued (never claimed, released, woken) or parked — at once: failed at
// now with info (RunCancelled), whose run_failed the caller publishes.
// horizon is the runs stream's last sequence, read before the transition:
// every request of the run stored by then, and every request of the
// submission stored after (a requeue or a wake racing the cancel), is
// stale from now on (see [IsStale]), so no worker runs the cancelled
// submission; a raw publish stored after the cancel is a new submission,
// as for any ended run. The record names horizon as its request, and the
// run_failed carries it (bus.HeaderRequest), which tells the API's event
// from an earlier submission's.
//
// A running run is refused with ErrHeld (its holder applies the cancel),
// an ended one with ErrEnded.
func CancelUnheld(r store.RunRecord, info loop.ErrorInfo, now time.Time, horizon uint64) (store.RunRecord, error) {
	switch r.Status {
	case Queued, Parked:
	case Running:
		return r, refuse("cancel", r, ErrHeld)
	default:
		return r, refuse("cancel", r, ErrEnded)
	}
	r.Status, r.Error, r.FinishedAt, r.Parked, r.Quiet = Failed, &info, now.UTC(), nil, false
	r.RequestSeq = max(r.RequestSeq, horizon)
	r.AddAttempt(store.StepCancel, "", now)
	return r, nil
}

// Unclaimed reports whether r is a run that no worker has claimed and
// for which nothing has published an event: queued, at attempt 0, with no
// earlier submission ended by a cancel with no holder or by a reject
// (each publishes a lone run_failed). Its claim reads neither a
// checkpoint nor a last event: there is none.
func Unclaimed(r store.RunRecord) bool {
	if r.Status != Queued || r.Attempt != 0 || r.AttemptsDropped > 0 {
		return false
	}
	for _, a := range r.Attempts {
		if a.Kind == store.StepCancel || a.Kind == store.StepReject {
			return false
		}
	}
	return true
}

// CancelledUnheld reports whether r's submission was ended by
// [CancelUnheld] (and nothing has happened to the run since).
func CancelledUnheld(r store.RunRecord) bool {
	return r.Status == Failed && r.LastStep() == store.StepCancel
}

// Reject fails the run of an invalid request (stored at seq, of the
// stated submission: 0 when it states none) before any claim: a run the
// request names that is not indexed yet (RejectNew), or queued for this
// very request or never claimed (an API that could not validate it). The
// failed submission records the request, so any other copy of it still in
// the runs stream (the API's requeue) is stale and never runs the failed
// run (see [IsStale]). A failed run stays as it is (the caller checks
// whether its run_failed may still be missing); a queued run that was
// under way (a release, a wake: its own request will resume it), a
// running, parked or completed one belongs to another request and is
// refused with ErrInFlight or ErrEnded; a request superseded by the one
// the record names, or of an earlier submission, with ErrStale.
func Reject(r store.RunRecord, info loop.ErrorInfo, worker string, now time.Time, seq uint64, submission int) (store.RunRecord, error) {
	switch r.Status {
	case Queued:
		if r.Attempt > 0 && r.RequestSeq != 0 && r.RequestSeq != seq {
			return r, refuse("reject", r, ErrInFlight)
		}
		if IsStale(r, submission, seq) {
			return r, refuse("reject", r, ErrStale)
		}
		r.Status, r.Error, r.Worker, r.FinishedAt, r.RequestSeq = Failed, &info, worker, now.UTC(), seq
		r.AddAttempt(store.StepReject, worker, now)
		return r, nil
	case Failed:
		return r, refuse("reject", r, ErrEnded)
	case Completed:
		return r, refuse("reject", r, ErrEnded)
	}
	return r, refuse("reject", r, ErrInFlight)
}

// RejectNew is the record of an invalid request's run that is not indexed.
func RejectNew(runID, agent string, info loop.ErrorInfo, worker string, now time.Time) store.RunRecord {
	now = now.UTC()
	r := store.RunRecord{
		RunID: runID, Agent: agent, Status: Failed, Worker: worker, Attempt: 1,
		Error: &info, StartedAt: now, FinishedAt: now,
	}
	r.AddAttempt(store.StepReject, worker, now)
	return r
}

// Repair settles a record that says running on the terminal event stored
// at storedAt, after the record's last change, while no worker holds the
// run (a worker that published the outcome and died before the index
// learnt it). Any doubt refuses with ErrNotStuck.
func Repair(r store.RunRecord, ev loop.Event, storedAt time.Time) (store.RunRecord, error) {
	if r.Status != Running || !storedAt.After(r.UpdatedAt) {
		return r, refuse("repair", r, ErrNotStuck)
	}
	r, err := Finish(r, ev, storedAt)
	if err == nil {
		r.Attempts[len(r.Attempts)-1].Kind = store.StepRepair
	}
	return r, err
}

// HealOutcome records a completed run's outcome found by its replay of
// the request stored at seq (the index missed it), unless the record says
// completed already, or has moved on to another request (a later
// submission claimed meanwhile: ErrInFlight).
func HealOutcome(r store.RunRecord, res *loop.RunResult, now time.Time, seq uint64) (store.RunRecord, error) {
	if r.Status == Completed {
		return r, refuse("heal outcome", r, ErrEnded)
	}
	if r.RequestSeq != 0 && r.RequestSeq != seq {
		return r, refuse("heal outcome", r, ErrInFlight)
	}
	r.Status, r.Result, r.Turns, r.Error = Completed, storedOutput(res.Output), res.Turns, nil
	r.Usage, r.FinalAgent = &res.Usage, res.FinalAgent
	r.FinishedAt = now.UTC()
	r.AddAttempt(store.StepHeal, "", now)
	return r, nil
}

// Abandon fails a run that can no longer end by itself: it says queued or
// running, no worker holds it and the runs stream no longer holds its
// request (a crash between the steps of another transition left it so).
// The caller publishes the terminal event, info, on the run's subject.
func Abandon(r store.RunRecord, info loop.ErrorInfo, now time.Time) (store.RunRecord, error) {
	if r.Status != Queued && r.Status != Running {
		return r, refuse("abandon", r, ErrNotStuck)
	}
	r.Status, r.Error, r.FinishedAt = Failed, &info, now.UTC()
	r.AddAttempt(store.StepAbandon, "", now)
	return r, nil
}

// Modify adapts a transition to store.Runs.Modify (a compare-and-set on
// the record, re-read and re-applied when another writer came first): the
// record becomes the transition's result, or stays as it was and the
// refusal is returned.
func Modify(t func(store.RunRecord) (store.RunRecord, error)) func(*store.RunRecord) error {
	return func(r *store.RunRecord) error {
		next, err := t(*r)
		if err != nil {
			return err
		}
		*r = next
		return nil
	}
}

// storedOutput is a run's output as its record keeps it: a Go value as
// its JSON value (bus.JSONValue), as its run_completed event carries it.
func storedOutput(v any) any {
	if out, err := bus.JSONValue(v); err == nil {
		return out
	}
	return v
}
