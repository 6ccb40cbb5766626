package store

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Control holds the durable control decisions of runs on the run index
// bucket: approval decisions per call and cancel requests. Each is written
// once per submission (the first decision wins; see createOnce), so a
// decision made while no worker owns the run waits for whichever worker
// claims it next.
//
//	runs  <run>.ap.<call>   an approval decision (call ids outside
//	                        [A-Za-z0-9_-] are hex-encoded with an "h" prefix)
//	      <run>.ask.<call>  when the call's approval wait ends (park.go)
//	      <run>.cancel      a cancel request
//
// Each is stamped with the run's submission it belongs to.
//
// It is safe for concurrent use.
type Control struct {
	b   *bucket
	now func() time.Time
	r   *Runs // the run index, whose Quiet flag a cancel request clears first
}

func (c *Control) runs() *Runs {
	if c.r == nil {
		return &Runs{b: c.b, now: c.now}
	}
	return c.r
}

// Control returns the control store.
func (s *Store) Control() *Control { return &Control{b: s.runs.b, now: s.cfg.Clock, r: s.runs} }

// ApprovalDecision is a stored decision on a gated call.
type ApprovalDecision struct {
	Decision loop.Decision `json:"decision" msgpack:"decision"`
	Reason   string        `json:"reason,omitempty" msgpack:"reason,omitempty"`
	At       time.Time     `json:"at" msgpack:"at"`
	// Submission is the run's submission the decision was made for.
	Submission int `json:"submission,omitempty" msgpack:"submission,omitempty"`
}

// CancelRequest is a stored cancel request.
type CancelRequest struct {
	Reason string    `json:"reason,omitempty" msgpack:"reason,omitempty"`
	At     time.Time `json:"at" msgpack:"at"`
	// Submission is the run's submission the cancel was requested for.
	Submission int `json:"submission,omitempty" msgpack:"submission,omitempty"`
}

// Control records are stamped with the run's submission (the run record's
// Submissions, 1 for the first): a record of an earlier submission is
// ignored by readers of a later one and replaced by its writers, so a
// resubmitted run never inherits the last submission's cancel, decisions
// or approval deadlines.

func callKey(run, call string) string {
	if !validID(call) || len(call) > 100 {
		call = "h" + hex.EncodeToString([]byte(call))
	}
	return run + ".ap." + call
}

// stamped is a control record stamped with its submission.
type stamped interface {
	submission() int
}

func (d *ApprovalDecision) submission() int { return d.Submission }
func (c *CancelRequest) submission() int    { return c.Submission }
func (a *askRecord) submission() int        { return a.Submission }

// readStamped reads the stamped record at key and its revision; nil when
// there is none.
func readStamped[T any, P interface {
	*T
	stamped
}](ctx context.Context, b *bucket, op, runID, key string) (P, uint64, error) {
	e, err := b.get(ctx, key)
	if isNotFound(err) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, wrapErr(op, runID, err)
	}
	rec := P(new(T))
	if err := msgpack.Unmarshal(e.Value(), rec); err != nil {
		return nil, 0, fmt.Errorf("store: %s %s: %w: %w", op, runID, ErrCorrupt, err)
	}
	return rec, e.Revision(), nil
}

// createOnce stores rec (of submission) at key unless a record of the same
// or a later submission is there; one of an earlier submission is replaced.
// It returns the record in force and whether this call stored it.
func createOnce[T any, P interface {
	*T
	stamped
}](ctx context.Context, b *bucket, op, runID, key string, rec P, submission int) (P, bool, error) {
	val, err := msgpack.Marshal(rec)
	if err != nil {
		return nil, false, err
	}
	for range 5 {
		_, err := b.create(ctx, key, val)
		if err == nil {
			return rec, true, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, false, wrapErr(op, runID, err)
		}
		got, rev, err := readStamped[T, P](ctx, b, op, runID, key)
		if err != nil {
			return nil, false, err
		}
		if got == nil {
			continue // withdrawn meanwhile: create again
		}
		if got.submission() >= submission {
			return got, false, nil
		}
		if _, err := b.update(ctx, key, val, rev); err == nil {
			return rec, true, nil
		} else if !isCAS(err) {
			return nil, false, wrapErr(op, runID, err)
		}
	}
	return nil, false, fmt.Errorf("store: %s %s: %w: the record keeps changing", op, runID, ErrConflict)
}

// readCurrent reads the record at key, nil when there is none or it
// belongs to an earlier submission than submission.
func readCurrent[T any, P interface {
	*T
	stamped
}](ctx context.Context, b *bucket, op, runID, key string, submission int) (P, error) {
	rec, _, err := readStamped[T, P](ctx, b, op, runID, key)
	if err != nil || rec == nil || rec.submission() < submission {
		return nil, err
	}
	return rec, nil
}

// Decide stores a decision for a call of the run's given submission unless
// one exists. It returns the decision in force (the stored one when
// another came first) and whether this call stored it.
func (c *Control) Decide(ctx context.Context, runID string, submission int, callID string, d loop.Decision, reason string) (ApprovalDecision, bool, error) {
	if err := checkID("approve", "run id", runID); err != nil {
		return ApprovalDecision{}, false, err
	}
	if callID == "" || len(callID) > 512 {
		return ApprovalDecision{}, false, fmt.Errorf("store: approve %s: %w: call id must be 1-512 bytes", runID, ErrInvalidArgument)
	}
	if d != loop.Approve && d != loop.Reject {
		return ApprovalDecision{}, false, fmt.Errorf("store: approve %s: %w: decision %q is not approve or reject", runID, ErrInvalidArgument, d)
	}
	submission = max(submission, 1)
	rec := &ApprovalDecision{Decision: d, Reason: reason, At: c.now().UTC(), Submission: submission}
	got, created, err := createOnce(ctx, c.b, "approve", runID, callKey(runID, callID), rec, submission)
	if err != nil {
		return ApprovalDecision{}, false, err
	}
	return *got, created, nil
}

// Decision returns the stored decision for a call of the run's given
// submission, or nil when none exists.
func (c *Control) Decision(ctx context.Context, runID string, submission int, callID string) (*ApprovalDecision, error) {
	return readCurrent[ApprovalDecision](ctx, c.b, "approval get", runID, callKey(runID, callID), max(submission, 1))
}

// RequestCancel stores a cancel request for the run's given submission
// unless one exists; it reports whether this call stored it.
func (c *Control) RequestCancel(ctx context.Context, runID string, submission int, reason string) (bool, error) {
	if err := checkID("cancel", "run id", runID); err != nil {
		return false, err
	}
	submission = max(submission, 1)
	if err := c.runs().Unquiet(ctx, runID); err != nil {
		return false, err
	}
	rec := &CancelRequest{Reason: reason, At: c.now().UTC(), Submission: submission}
	_, created, err := createOnce(ctx, c.b, "cancel", runID, runID+".cancel", rec, submission)
	return created, err
}

// CancelRequested returns the stored cancel request of the run's given
// submission, or nil.
func (c *Control) CancelRequested(ctx context.Context, runID string, submission int) (*CancelRequest, error) {
	return readCurrent[CancelRequest](ctx, c.b, "cancel get", runID, runID+".cancel", max(submission, 1))
}

// ClearCancel removes a run's cancel request (housekeeping: a later
// submission ignores an earlier one's cancel anyway).
func (c *Control) ClearCancel(ctx context.Context, runID string) error {
	return wrapErr("cancel clear", runID, c.b.clearKey(ctx, runID+".cancel", 0))
}

// Ownership keys, the layout of releases before the holdings record
// (holdings.go), recorded which worker holds which run's delivery, so a
// surviving worker could release the runs of a worker that is provably
// gone without waiting for the ack wait. Workers no longer write them;
// Owned still reads them:
//
//	runs  own.<worker>.<run>   the ack subject of the worker's delivery
func ownerKey(worker, run string) string { return "own." + worker + "." + run }

// SetOwner records that worker holds run's delivery with ack subject ack,
// and returns the record's revision (for ClearOwnerAt).
func (c *Control) SetOwner(ctx context.Context, worker, runID, ack string) (uint64, error) {
	if err := checkID("set owner", "worker id", worker); err != nil {
		return 0, err
	}
	if err := checkID("set owner", "run id", runID); err != nil {
		return 0, err
	}
	rev, err := c.b.put(ctx, ownerKey(worker, runID), []byte(ack))
	if err != nil {
		return 0, wrapErr("set owner", runID, err)
	}
	return rev, nil
}

// ClearOwner removes worker's ownership record of run.
func (c *Control) ClearOwner(ctx context.Context, worker, runID string) error {
	return c.ClearOwnerAt(ctx, worker, runID, 0)
}

// ClearOwnerAt removes worker's ownership record of run if it is still at
// revision rev (whatever its revision when rev is 0): a later execution of
// the same run on the same worker keeps its own record.
func (c *Control) ClearOwnerAt(ctx context.Context, worker, runID string, rev uint64) error {
	return wrapErr("clear owner", runID, c.b.clearKey(ctx, ownerKey(worker, runID), rev))
}

// Ownership is one ownership record.
type Ownership struct {
	Worker   string
	RunID    string
	Ack      string
	Revision uint64
	Deleted  bool
}

// TakeOwnership removes an ownership record if it is still at revision
// rev; only the caller that succeeds may release the delivery.
func (c *Control) TakeOwnership(ctx context.Context, o Ownership) (bool, error) {
	if err := c.b.purgeKey(ctx, ownerKey(o.Worker, o.RunID), o.Revision); err != nil {
		if isCAS(err) || isNotFound(err) {
			return false, nil
		}
		return false, wrapErr("take ownership", o.RunID, err)
	}
	return true, nil
}

// WatchOwners streams ownership changes, starting with the current
// records, until ctx ends. It uses one watcher (one consumer).
func (c *Control) WatchOwners(ctx context.Context) (<-chan Ownership, error) {
	return watchKeys(ctx, c.b, "own.>", "watch owners", func(e jetstream.KeyValueEntry) (Ownership, bool) {
		parts := strings.SplitN(e.Key(), ".", 3)
		if len(parts) != 3 {
			return Ownership{}, false
		}
		return Ownership{Worker: parts[1], RunID: parts[2], Ack: string(e.Value()), Revision: e.Revision(),
			Deleted: e.Operation() != jetstream.KeyValuePut}, true
	})
}

// watchKeys streams the changes of the keys matching filter, starting
// with their current values, until ctx ends, through one watcher (one
// consumer): each entry as decode makes it, skipping those it refuses.
func watchKeys[T any](ctx context.Context, b *bucket, filter, op string, decode func(jetstream.KeyValueEntry) (T, bool), opts ...jetstream.WatchOpt) (<-chan T, error) {
	w, err := b.kv.Watch(ctx, filter, opts...)
	if err != nil {
		return nil, wrapErr(op, b.name, err)
	}
	out := make(chan T, 64)
	go func() {
		defer close(out)
		defer stopWatch(w)
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil {
					continue
				}
				v, ok := decode(e)
				if !ok {
					continue
				}
				select {
				case out <- v:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

// Owned reports whether any worker holds an ownership record of the run
// or lists it in its holdings record.
func (c *Control) Owned(ctx context.Context, runID string) (bool, error) {
	if err := checkID("owned", "run id", runID); err != nil {
		return false, err
	}
	entries, err := c.owners(ctx, "owned", runID)
	if err != nil || len(entries) > 0 {
		return len(entries) > 0, err
	}
	// A holdings record may list a run its worker no longer holds (it
	// drops ended runs in its next write): any doubt counts as owned.
	return c.listedIn(ctx, "owned", runID)
}

// owners lists the ownership records of the run, whoever holds them.
func (c *Control) owners(ctx context.Context, op, runID string) ([]jetstream.KeyValueEntry, error) {
	entries, err := c.b.list(ctx, "own.*."+runID)
	if err != nil {
		return nil, wrapErr(op, runID, err)
	}
	return entries, nil
}

// ClearOtherOwners removes the ownership records other workers hold for
// run (a worker that claims a redelivered run retires its predecessors'
// records, so no survivor releases the new delivery by mistake). It returns
// how many it removed.
func (c *Control) ClearOtherOwners(ctx context.Context, worker, runID string) (int, error) {
	if err := checkID("clear owners", "run id", runID); err != nil {
		return 0, err
	}
	entries, err := c.owners(ctx, "clear owners", runID)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if e.Key() == ownerKey(worker, runID) {
			continue
		}
		if err := c.b.purgeKey(ctx, e.Key(), e.Revision()); err == nil {
			n++
		}
	}
	return n, nil
}
