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
// once with kv.Create (the first decision wins), so a decision made while
// no worker owns the run waits for whichever worker claims it next.
//
//	runs  <run>.ap.<call>   an approval decision (call ids outside
//	                        [A-Za-z0-9_-] are hex-encoded with an "h" prefix)
//	      <run>.cancel      a cancel request
//
// It is safe for concurrent use.
type Control struct {
	b   *bucket
	now func() time.Time
}

// Control returns the control store.
func (s *Store) Control() *Control { return &Control{b: s.runs.b, now: s.cfg.Clock} }

// ApprovalDecision is a stored decision on a gated call.
type ApprovalDecision struct {
	Decision loop.Decision `json:"decision" msgpack:"decision"`
	Reason   string        `json:"reason,omitempty" msgpack:"reason,omitempty"`
	At       time.Time     `json:"at" msgpack:"at"`
}

// CancelRequest is a stored cancel request.
type CancelRequest struct {
	Reason string    `json:"reason,omitempty" msgpack:"reason,omitempty"`
	At     time.Time `json:"at" msgpack:"at"`
}

func callKey(run, call string) string {
	if !validID(call) || len(call) > 100 {
		call = "h" + hex.EncodeToString([]byte(call))
	}
	return run + ".ap." + call
}

// Decide stores a decision for a call unless one exists. It returns the
// decision in force (the stored one when another came first) and whether
// this call stored it.
func (c *Control) Decide(ctx context.Context, runID, callID string, d loop.Decision, reason string) (ApprovalDecision, bool, error) {
	if err := checkID("approve", "run id", runID); err != nil {
		return ApprovalDecision{}, false, err
	}
	if callID == "" || len(callID) > 512 {
		return ApprovalDecision{}, false, fmt.Errorf("store: approve %s: %w: call id must be 1-512 bytes", runID, ErrInvalidArgument)
	}
	if d != loop.Approve && d != loop.Reject {
		return ApprovalDecision{}, false, fmt.Errorf("store: approve %s: %w: decision %q is not approve or reject", runID, ErrInvalidArgument, d)
	}
	rec := ApprovalDecision{Decision: d, Reason: reason, At: c.now().UTC()}
	val, err := msgpack.Marshal(&rec)
	if err != nil {
		return ApprovalDecision{}, false, err
	}
	key := callKey(runID, callID)
	if _, err := c.b.create(ctx, key, val); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			got, gerr := c.Decision(ctx, runID, callID)
			if gerr != nil {
				return ApprovalDecision{}, false, gerr
			}
			if got != nil {
				return *got, false, nil
			}
		}
		return ApprovalDecision{}, false, wrapErr("approve", runID, err)
	}
	return rec, true, nil
}

// Decision returns the stored decision for a call, or nil when none exists.
func (c *Control) Decision(ctx context.Context, runID, callID string) (*ApprovalDecision, error) {
	e, err := c.b.get(ctx, callKey(runID, callID))
	if err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, wrapErr("approval get", runID, err)
	}
	var rec ApprovalDecision
	if err := msgpack.Unmarshal(e.Value(), &rec); err != nil {
		return nil, fmt.Errorf("store: approval get %s: %w: %w", runID, ErrCorrupt, err)
	}
	return &rec, nil
}

// RequestCancel stores a cancel request unless one exists; it reports
// whether this call stored it.
func (c *Control) RequestCancel(ctx context.Context, runID, reason string) (bool, error) {
	if err := checkID("cancel", "run id", runID); err != nil {
		return false, err
	}
	val, err := msgpack.Marshal(&CancelRequest{Reason: reason, At: c.now().UTC()})
	if err != nil {
		return false, err
	}
	if _, err := c.b.create(ctx, runID+".cancel", val); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return false, nil
		}
		return false, wrapErr("cancel", runID, err)
	}
	return true, nil
}

// CancelRequested returns the stored cancel request, or nil.
func (c *Control) CancelRequested(ctx context.Context, runID string) (*CancelRequest, error) {
	e, err := c.b.get(ctx, runID+".cancel")
	if err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, wrapErr("cancel get", runID, err)
	}
	var rec CancelRequest
	if err := msgpack.Unmarshal(e.Value(), &rec); err != nil {
		return nil, fmt.Errorf("store: cancel get %s: %w: %w", runID, ErrCorrupt, err)
	}
	return &rec, nil
}

// ClearCancel removes a run's cancel request (a resubmitted run starts
// without it).
func (c *Control) ClearCancel(ctx context.Context, runID string) error {
	ctx, cancel := c.b.callCtx(ctx)
	defer cancel()
	if err := c.b.kv.Purge(ctx, runID+".cancel"); err != nil && !isNotFound(err) {
		return wrapErr("cancel clear", runID, err)
	}
	return nil
}

// Ownership keys record which worker holds which run's delivery, so a
// surviving worker can release the runs of a worker that is provably gone
// without waiting for the ack wait:
//
//	runs  own.<worker>.<run>   the ack subject of the worker's delivery
func ownerKey(worker, run string) string { return "own." + worker + "." + run }

// SetOwner records that worker holds run's delivery with ack subject ack.
func (c *Control) SetOwner(ctx context.Context, worker, runID, ack string) error {
	if err := checkID("set owner", "worker id", worker); err != nil {
		return err
	}
	if err := checkID("set owner", "run id", runID); err != nil {
		return err
	}
	if _, err := c.b.put(ctx, ownerKey(worker, runID), []byte(ack)); err != nil {
		return wrapErr("set owner", runID, err)
	}
	return nil
}

// ClearOwner removes worker's ownership record of run.
func (c *Control) ClearOwner(ctx context.Context, worker, runID string) error {
	return c.ClearOwnerIf(ctx, worker, runID, "")
}

// ClearOwnerIf removes worker's ownership record of run if it still names
// the delivery ack (any delivery when ack is ""): a later execution of the
// same run on the same worker keeps its own record.
func (c *Control) ClearOwnerIf(ctx context.Context, worker, runID, ack string) error {
	ctx, cancel := c.b.callCtx(ctx)
	defer cancel()
	var opts []jetstream.KVDeleteOpt
	if ack != "" {
		e, err := c.b.kv.Get(ctx, ownerKey(worker, runID))
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return wrapErr("clear owner", runID, err)
		}
		if string(e.Value()) != ack {
			return nil
		}
		opts = append(opts, jetstream.LastRevision(e.Revision()))
	}
	if err := c.b.kv.Purge(ctx, ownerKey(worker, runID), opts...); err != nil && !isNotFound(err) && !isCAS(err) {
		return wrapErr("clear owner", runID, err)
	}
	return nil
}

// ClearDecisions removes a run's approval decisions and deadlines (a
// resubmitted run asks afresh: a scripted or replayed call id must not
// find the last submission's answer, or its expired deadline).
func (c *Control) ClearDecisions(ctx context.Context, runID string) error {
	if err := checkID("clear decisions", "run id", runID); err != nil {
		return err
	}
	for _, f := range []string{runID + ".ap.>", runID + ".ask.>"} {
		if err := c.b.purge(ctx, f); err != nil {
			return wrapErr("clear decisions", runID, err)
		}
	}
	return nil
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
func watchKeys[T any](ctx context.Context, b *bucket, filter, op string, decode func(jetstream.KeyValueEntry) (T, bool)) (<-chan T, error) {
	w, err := b.kv.Watch(ctx, filter)
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

// Owned reports whether any worker holds an ownership record of the run.
func (c *Control) Owned(ctx context.Context, runID string) (bool, error) {
	if err := checkID("owned", "run id", runID); err != nil {
		return false, err
	}
	entries, err := c.owners(ctx, "owned", runID)
	return len(entries) > 0, err
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
