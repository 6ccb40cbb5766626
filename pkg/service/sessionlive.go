package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// A session is served one run at a time, fleet-wide: its live-run slot
// (store.LiveSlot, <session>.live in the sessions bucket) names the run,
// and every change of it is a compare-and-set, so two API instances that
// receive two messages for one session at once produce one run and one
// injection. A new run for a session with a live run is injected into that
// run, queued behind it or refused (the request's on_busy); when the run
// ends, its worker asks for the handoff (<p>.api.session.<id>.handoff),
// and the first queued request, or the messages the run left in its
// mailbox, start the session's next run (metadata previous_run_id). Any
// submit that finds the slot's run ended does the handoff too, so a worker
// that died before asking delays the next run until then, and loses none.

// slotGrace is how long a slot naming a run the index does not know is
// taken for one whose submit is still indexing it (any API instance starts
// it from the slot's copy of the request); past it, the run is gone (its
// record expired) and the slot is stale.
const slotGrace = time.Minute

// gateTries bounds the compare-and-set rounds of one submit: each lost
// round means another writer changed the slot.
const gateTries = 16

// previousRunKey is the metadata key linking a session's run to the run
// whose end started it.
const previousRunKey = "previous_run_id"

// sessionGate decides what a new run for req's session does. proceed is
// true when the session's slot names req's run (taken now, or by an
// earlier try of the same request) and the caller starts it; otherwise
// the reply says where the input went.
func (a *API) sessionGate(ctx context.Context, req *bus.RunRequest, generated bool) (_ *bus.SubmitReply, proceed bool, _ error) {
	runs := a.cfg.Store.Runs()
	if !generated {
		// A run the fleet knows: its resubmission, replay or retry follows
		// the run's record, not the session's slot.
		if _, err := runs.Get(ctx, req.RunID); err == nil {
			return nil, true, nil
		} else if !errors.Is(err, store.ErrRunNotFound) {
			return nil, false, err
		}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, false, err
	}
	sess := a.cfg.Store.Session()
	for range gateTries {
		le, err := sess.Live(ctx, req.SessionID)
		if errors.Is(err, store.ErrRunNotFound) {
			_, err = sess.TakeLive(ctx, req.SessionID, store.LiveSlot{RunID: req.RunID, Request: body}, 0)
			if errors.Is(err, store.ErrConflict) {
				continue
			}
			return nil, err == nil, err
		}
		if err != nil {
			return nil, false, err
		}
		if le.Slot.RunID == req.RunID {
			return nil, true, nil
		}
		if queued(le.Slot.Queue, req.RunID) {
			return queuedReply(a.names, req, le.Slot.RunID), false, nil
		}
		cur, err := runs.Get(ctx, le.Slot.RunID)
		if errors.Is(err, store.ErrRunNotFound) {
			if len(le.Slot.Request) > 0 && time.Since(le.Slot.Since) < slotGrace {
				// Taken by a submit that has not indexed its run yet, or
				// died before it did: start it from the slot (a start is
				// idempotent by run id), then look again.
				if err := a.startSlot(ctx, le); err != nil {
					return nil, false, err
				}
				continue
			}
			// The slot's run is gone (its record expired): the slot is stale.
			slot := store.LiveSlot{RunID: req.RunID, Request: body, Queue: le.Slot.Queue, Previous: le.Slot.RunID}
			_, err = sess.TakeLive(ctx, req.SessionID, slot, le.Revision)
			if errors.Is(err, store.ErrConflict) {
				continue
			}
			return nil, err == nil, err
		}
		if err != nil {
			return nil, false, err
		}
		rec := a.settled(ctx, cur)
		if rec.Status.Ended() {
			if _, err := a.handOff(ctx, req.SessionID, le, &rec); err != nil {
				return nil, false, err
			}
			continue
		}
		switch req.OnBusy {
		case bus.OnBusyRefuse:
			return nil, false, &bus.APIError{Type: bus.TypeSessionBusy,
				Message: fmt.Sprintf("session %s has a live run, %s (%s)", req.SessionID, rec.RunID, wireState(rec.Status)),
				Hint:    fmt.Sprintf("send on_busy inject (the default) to add the message to that run, on_busy queue to run it after, or wait for it to end: lovia tail %s", rec.RunID)}
		case bus.OnBusyQueue:
			slot := le.Slot
			slot.Queue = append(slices.Clip(slot.Queue), body)
			_, err := sess.TakeLive(ctx, req.SessionID, slot, le.Revision)
			switch {
			case errors.Is(err, store.ErrConflict):
				continue
			case errors.Is(err, store.ErrTooLarge):
				return nil, false, &bus.APIError{Type: bus.TypeSessionBusy,
					Message: fmt.Sprintf("session %s: the requests queued behind run %s fill its slot", req.SessionID, rec.RunID),
					Hint:    "wait for the queued runs to start, or send on_busy inject"}
			case err != nil:
				return nil, false, err
			}
			return queuedReply(a.names, req, rec.RunID), false, nil
		default:
			text, err := injectText(req.Input)
			if err != nil {
				return nil, false, err
			}
			// The key makes a retry of this submit inject once.
			rep, err := a.Inject(ctx, rec.RunID, &bus.InjectRequest{Content: text, Key: "submit-" + req.RunID})
			var ae *bus.APIError
			if errors.As(err, &ae) && strings.HasPrefix(ae.Message, "run "+rec.RunID+" is ") {
				continue // it ended meanwhile: hand the session on, look again
			}
			if err != nil {
				return nil, false, err
			}
			events, _ := a.names.Events(rec.RunID)
			return &bus.SubmitReply{RunID: rec.RunID, EventsSubject: events, Agent: rec.Agent, Status: wireState(rec.Status),
				Injected: true, InjectToken: rep.Token}, false, nil
		}
	}
	return nil, false, &bus.APIError{Type: bus.TypeInternal,
		Message: fmt.Sprintf("session %s changed %d times while this submit read it", req.SessionID, gateTries),
		Hint:    "retry the submit with the same run_id"}
}

// queued reports whether a queue holds a request for runID.
func queued(queue []json.RawMessage, runID string) bool {
	for _, q := range queue {
		var r struct {
			RunID string `json:"run_id"`
		}
		if json.Unmarshal(q, &r) == nil && r.RunID == runID {
			return true
		}
	}
	return false
}

func queuedReply(n bus.Names, req *bus.RunRequest, behind string) *bus.SubmitReply {
	events, _ := n.Events(req.RunID)
	return &bus.SubmitReply{RunID: req.RunID, EventsSubject: events, Agent: req.Agent, Status: bus.StateQueued, QueuedBehind: behind}
}

// injectText is the steering message an input becomes when it is
// injected into a session's live run: the text, or the user messages of a
// list, one paragraph each.
func injectText(in bus.Input) (string, error) {
	if !in.IsList() {
		return in.Text, nil
	}
	parts := make([]string, 0, len(in.Messages))
	for i, m := range in.Messages {
		if m.Role != "user" {
			return "", invalid(fmt.Sprintf("input[%d].role", i),
				fmt.Sprintf("is %s: only user messages can be injected into the session's live run; send on_busy queue to start a run with this input after it", m.Role))
		}
		parts = append(parts, m.Content)
	}
	return strings.Join(parts, "\n\n"), nil
}

// startSlot starts the run a slot names from its copy of the request.
func (a *API) startSlot(ctx context.Context, le *store.LiveEntry) error {
	var req bus.RunRequest
	if err := json.Unmarshal(le.Slot.Request, &req); err != nil {
		return fmt.Errorf("session slot of run %s: %w", le.Slot.RunID, err)
	}
	_, err := a.startRun(ctx, &req, req.EventEncoding(bus.JSON))
	return err
}

// handOff passes a session's slot on from its run that has ended (rec):
// to the first queued request, or to a new run of the messages the run
// left in its mailbox (after a completed run), each given first; or, with
// neither, the session has no live run. A compare-and-set on the slot
// read (le) makes one caller do it; the others find the slot changed and
// return "". It returns the next run's id.
func (a *API) handOff(ctx context.Context, sessionID string, le *store.LiveEntry, rec *store.RunRecord) (string, error) {
	sess := a.cfg.Store.Session()
	var prev bus.RunRequest
	if len(le.Slot.Request) > 0 {
		_ = json.Unmarshal(le.Slot.Request, &prev)
	}
	queue := le.Slot.Queue
	var next *bus.RunRequest
	if len(queue) > 0 {
		next = new(bus.RunRequest)
		if err := json.Unmarshal(queue[0], next); err != nil {
			return "", fmt.Errorf("session %s: a queued request: %w", sessionID, err)
		}
		queue = queue[1:]
	}
	mb, err := a.cfg.Store.Mailbox(rec.RunID)
	if err != nil {
		return "", err
	}
	var left []loop.MailMessage
	if rec.Status == store.RunCompleted {
		if left, err = mb.Pending(ctx); err != nil {
			return "", err
		}
	}
	if len(left) > 0 {
		msgs := make([]bus.InputMessage, 0, len(left)+1)
		for _, m := range left {
			msgs = append(msgs, bus.InputMessage{Role: "user", Content: m.Content})
		}
		if next == nil {
			// The next leg of the conversation: the ended run's settings,
			// the messages it did not take as input.
			next = &bus.RunRequest{RunID: bus.NewRunID(), Agent: rec.Agent, SessionID: sessionID, MaxTurns: prev.MaxTurns,
				Budget: prev.Budget, OutputSchema: prev.OutputSchema, ExtraInstructions: prev.ExtraInstructions,
				Encoding: prev.Encoding, Metadata: maps.Clone(prev.Metadata)}
			delete(next.Metadata, "parent_run_id")
		} else {
			msgs = append(msgs, next.Input.AsMessages()...)
		}
		next.Input = bus.MessagesInput(msgs...)
	}
	if next == nil {
		err := sess.FreeLive(ctx, sessionID, le.Revision)
		if errors.Is(err, store.ErrConflict) {
			err = nil
		}
		return "", err
	}
	if next.Metadata == nil {
		next.Metadata = map[string]any{}
	}
	next.Metadata[previousRunKey] = rec.RunID
	next.OnBusy = ""
	body, err := json.Marshal(next)
	if err != nil {
		return "", err
	}
	nle, err := sess.TakeLive(ctx, sessionID, store.LiveSlot{RunID: next.RunID, Request: body, Queue: queue, Previous: rec.RunID}, le.Revision)
	if errors.Is(err, store.ErrConflict) {
		return "", nil // another instance handed it on
	}
	if err != nil {
		return "", err
	}
	if err := a.startSlot(ctx, nle); err != nil {
		// The slot keeps the request: the next submit or handoff starts it.
		return "", err
	}
	for _, m := range left {
		if _, err := mb.Remove(ctx, m.Token); err != nil {
			a.log.Warn("a message the session's next run took stays in the ended run's mailbox", "run_id", rec.RunID, "token", m.Token, "error", err)
		}
	}
	a.log.Info("session handed on", "session_id", sessionID, "ended_run_id", rec.RunID, "next_run_id", next.RunID,
		"from_mailbox", len(left), "queued", len(queue))
	return next.RunID, nil
}

// Handoff answers <p>.api.session.<id>.handoff: the worker that ended one
// of the session's runs asks for the session's next run.
func (a *API) Handoff(ctx context.Context, sessionID string, req *bus.HandoffRequest) (*bus.HandoffReply, error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	if err := bus.ValidateID("session_id", sessionID); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	le, err := a.cfg.Store.Session().Live(ctx, sessionID)
	if errors.Is(err, store.ErrRunNotFound) {
		return &bus.HandoffReply{}, nil
	}
	if err != nil {
		return nil, err
	}
	if le.Slot.RunID != req.RunID {
		return &bus.HandoffReply{}, nil // handed on already, or another run's
	}
	var rec store.RunRecord
	if req.Status != "" && req.Agent != "" {
		// The worker that ended the run says how: no record read.
		rec = store.RunRecord{RunID: req.RunID, Agent: req.Agent, Status: store.RunStatus(req.Status)}
	} else {
		e, err := a.cfg.Store.Runs().Get(ctx, req.RunID)
		if err != nil {
			if errors.Is(err, store.ErrRunNotFound) {
				return nil, runNotFound(req.RunID)
			}
			return nil, err
		}
		if rec = a.settled(ctx, e); !rec.Status.Ended() {
			return nil, invalid("run_id", fmt.Sprintf("run %s has not ended (%s)", req.RunID, rec.Status))
		}
	}
	next, err := a.handOff(ctx, sessionID, le, &rec)
	if err != nil {
		return nil, err
	}
	return &bus.HandoffReply{NextRunID: next}, nil
}
