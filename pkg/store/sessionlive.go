package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// LiveSlot is a session's live-run slot: the one run of the session the
// fleet serves at a time, and the requests queued behind it. It is stored
// under <session>.live in the sessions bucket and changed only by
// compare-and-set, so the broker decides between API instances that race
// for one session: of two creates, one wins.
type LiveSlot struct {
	// RunID is the session's live run.
	RunID string `json:"run_id"`
	// Request is that run's request (JSON, docs/protocol.md#run-request),
	// kept so that any API instance can start the run when the one that
	// took the slot died before indexing it.
	Request json.RawMessage `json:"request,omitempty"`
	// Queue holds the requests (JSON) submitted with on_busy queue, in
	// order: the first starts when the live run ends.
	Queue []json.RawMessage `json:"queue,omitempty"`
	// Previous is the run whose end handed the slot to RunID.
	Previous string `json:"previous_run_id,omitempty"`
	// Since is when the slot took RunID.
	Since time.Time `json:"since"`
}

// LiveEntry is a stored LiveSlot with the revision a compare-and-set
// needs.
type LiveEntry struct {
	Slot     LiveSlot
	Revision uint64
}

// liveKey is the key of a session's live-run slot. A session id holds no
// '.', so it is never a segment key (<session>.s.<run>).
func liveKey(session string) string { return session + ".live" }

// Live returns the session's live-run slot, or ErrRunNotFound when the
// session has no live run.
func (s *Session) Live(ctx context.Context, sessionID string) (*LiveEntry, error) {
	const op = "session live"
	if err := checkID(op, "session id", sessionID); err != nil {
		return nil, err
	}
	e, err := s.b.get(ctx, liveKey(sessionID))
	if isNotFound(err) {
		return nil, fmt.Errorf("store: %s %s: %w", op, sessionID, ErrRunNotFound)
	}
	if err != nil {
		return nil, wrapErr(op, sessionID, err)
	}
	le := &LiveEntry{Revision: e.Revision()}
	if err := json.Unmarshal(e.Value(), &le.Slot); err != nil {
		return nil, fmt.Errorf("store: %s %s: %w: %v", op, sessionID, ErrCorrupt, err)
	}
	return le, nil
}

// TakeLive stores slot as the session's live run: when rev is 0 only if
// the session has none (a create), otherwise only if the slot is still at
// rev. It returns ErrConflict when another writer changed the slot first.
func (s *Session) TakeLive(ctx context.Context, sessionID string, slot LiveSlot, rev uint64) (*LiveEntry, error) {
	const op = "session take live"
	if err := checkID(op, "session id", sessionID); err != nil {
		return nil, err
	}
	if slot.Since.IsZero() {
		slot.Since = time.Now().UTC()
	}
	val, err := json.Marshal(&slot)
	if err != nil {
		return nil, fmt.Errorf("store: %s %s: %w", op, sessionID, err)
	}
	if s.b.chunk > 0 && len(val) > s.b.chunk {
		return nil, fmt.Errorf("store: %s %s: %w: the slot with its queued requests is %d bytes, over %d",
			op, sessionID, ErrTooLarge, len(val), s.b.chunk)
	}
	var nrev uint64
	if rev == 0 {
		nrev, err = s.b.create(ctx, liveKey(sessionID), val)
	} else {
		nrev, err = s.b.update(ctx, liveKey(sessionID), val, rev)
	}
	if err != nil {
		return nil, wrapErr(op, sessionID, err)
	}
	return &LiveEntry{Slot: slot, Revision: nrev}, nil
}

// FreeLive removes the session's live-run slot if it is still at rev: the
// session has no live run from then on. It returns ErrConflict when
// another writer changed the slot first.
func (s *Session) FreeLive(ctx context.Context, sessionID string, rev uint64) error {
	const op = "session free live"
	if err := checkID(op, "session id", sessionID); err != nil {
		return err
	}
	err := s.b.deleteKey(ctx, liveKey(sessionID), rev)
	if isNotFound(err) {
		return nil
	}
	return wrapErr(op, sessionID, err)
}
