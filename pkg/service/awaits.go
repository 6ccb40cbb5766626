package service

import (
	"context"
	"fmt"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// awaits reports whether run rec has asked for a decision on callID: it
// is parked on that call, or its events hold an approval_required for it
// (the event is stored before any client can see it, so a client that
// answers what it saw is never refused). When the events cannot be read
// it says yes: a decision is never refused for a store hiccup.
func (a *API) awaits(ctx context.Context, rec *store.RunRecord, callID string) bool {
	if rec.Parked != nil && rec.Parked.CallID == callID {
		return true
	}
	last, err := a.pub.LastEvent(ctx, rec.RunID)
	if err != nil {
		return true
	}
	if last == nil {
		return false
	}
	a.tailerOnce.Do(func() {
		a.tailer, a.tailerErr = bus.NewTailer(a.js, bus.TailerConfig{Prefix: a.names.Prefix()})
	})
	if a.tailerErr != nil {
		return true
	}
	tail, err := a.tailer.Tail(ctx, rec.RunID, bus.FromStart())
	if err != nil {
		return true
	}
	defer func() { _ = tail.Close(context.WithoutCancel(ctx)) }()
	for {
		env, err := tail.Next(ctx)
		if err != nil {
			return true
		}
		if env.Type == loop.EventApprovalRequired {
			if ev, err := env.Event(); err == nil {
				if ar, ok := ev.(*loop.ApprovalRequired); ok && ar.Call.ID == callID {
					return true
				}
			}
		}
		if env.Seq >= last.HighSeq {
			return false
		}
	}
}

// notAwaited is the error of a decision for a call the run never asked
// about.
func notAwaited(runID, callID string) error {
	return &bus.APIError{Type: bus.TypeInvalidRequest,
		Message: fmt.Sprintf("run %s is not waiting for a decision on call %s", runID, callID),
		Hint:    "decide the calls the run asks about: its approval_required events name them (lovia tail " + runID + "), and lovia status shows what a parked run awaits"}
}
