package store

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
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
