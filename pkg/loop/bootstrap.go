package loop

import (
	"fmt"
	"maps"
)

// bootstrap activates the active agent and builds the transcript:
// [system head] + session history + (input | snapshot entries).
func (ru *run) bootstrap(snap *Snapshot) error {
	if snap != nil {
		a := resolveAgent(ru.entry, snap.Agent)
		if a == nil {
			return &UserError{
				Message: fmt.Sprintf("the stored run's agent %q is not reachable from entry agent %q", snap.Agent, ru.entry.Name),
				Hint:    "resume with the same entry agent the run started with",
			}
		}
		ru.agent = a
		ru.resumed = true
	}
	ru.rc.setAgent(ru.agent)
	act, err := ru.activate(ru.agent)
	if err != nil {
		return err
	}
	ru.act = act
	var history []Entry
	if ru.opts.session != nil {
		segs, err := ru.opts.session.Segments(ru.parent, ru.opts.sessionID)
		if err != nil {
			return fmt.Errorf("session %s: read: %w", ru.opts.sessionID, err)
		}
		n := 0
		for i := range segs {
			n += len(segs[i].Entries)
		}
		history = make([]Entry, 0, n)
		for i := range segs {
			history = append(history, segs[i].Entries...)
		}
		if snap == nil && len(segs) > 0 {
			if cs, ok := segs[len(segs)-1].Meta["context_state"].(map[string]any); ok {
				ru.contextState = maps.Clone(cs)
			}
		}
	}
	head, err := ru.renderHead(act)
	if err != nil {
		return err
	}
	var body []Entry
	if snap != nil {
		body = NormalizeAnsweredCalls(snap.Entries)
	} else {
		body = ru.input
	}
	tr := make([]Entry, 0, len(head)+len(history)+len(body)+6)
	tr = append(tr, head...)
	tr = append(tr, history...)
	tr = append(tr, body...)
	ru.rc.entries = tr
	ru.headLen = len(head)
	ru.runStart = len(head) + len(history)
	if snap != nil {
		ru.stored = len(snap.Entries)
		ru.rc.usage = snap.Usage
		ru.turns = snap.Turns
		ru.lastInputTokens = snap.LastInputTokens
		if len(snap.ContextState) > 0 {
			ru.contextState = maps.Clone(snap.ContextState)
		}
	}
	if ru.contextState == nil && ru.policy != nil {
		ru.contextState = map[string]any{}
	}
	return nil
}

// appendEntries appends to the transcript.
func (ru *run) appendEntries(es ...Entry) {
	ru.rc.mu.Lock()
	ru.rc.entries = append(ru.rc.entries, es...)
	ru.rc.mu.Unlock()
}

// transcript returns the live transcript (read-only; the run goroutine owns
// writes).
func (ru *run) transcript() []Entry { return ru.rc.entries }

// runEntries returns a copy of this run's own entries.
func (ru *run) runEntries() []Entry {
	tr := ru.transcript()
	return append([]Entry(nil), tr[ru.runStart:]...)
}
