package bus

import (
	"strconv"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// SessionsListRequest is the body of <p>.api.sessions.list: the sessions
// of the runs the run index holds, the one with the newest run first.
type SessionsListRequest struct {
	// Agent keeps the sessions whose newest run is of this agent.
	Agent string `json:"agent,omitempty" msgpack:"agent,omitempty"`
	// Limit is the page size: DefaultListLimit when 0, at most
	// MaxListLimit.
	Limit int `json:"limit,omitempty" msgpack:"limit,omitempty"`
	// Cursor is a reply's next_cursor: the page after it.
	Cursor string `json:"cursor,omitempty" msgpack:"cursor,omitempty"`
}

// Validate checks the agent and the limit.
func (r *SessionsListRequest) Validate() error {
	if r.Agent != "" {
		if err := ValidateID("agent", r.Agent); err != nil {
			return err
		}
	}
	if r.Limit < 0 || r.Limit > MaxListLimit {
		return &FieldError{Field: "limit", Reason: "must be between 0 and " + strconv.Itoa(MaxListLimit)}
	}
	return nil
}

// PageSize is the limit, DefaultListLimit when unset.
func (r *SessionsListRequest) PageSize() int {
	if r.Limit == 0 {
		return DefaultListLimit
	}
	return r.Limit
}

// SessionSummary is one session of a listing.
type SessionSummary struct {
	SessionID string `json:"session_id" msgpack:"session_id"`
	// Runs counts the session's runs the run index holds.
	Runs int `json:"runs" msgpack:"runs"`
	// LastRun is the session's newest run.
	LastRun RunSummary `json:"last_run" msgpack:"last_run"`
}

// SessionsListReply answers <p>.api.sessions.list.
type SessionsListReply struct {
	Sessions   []SessionSummary `json:"sessions" msgpack:"sessions"`
	NextCursor string           `json:"next_cursor" msgpack:"next_cursor"`
}

// Validate checks the session ids.
func (r *SessionsListReply) Validate() error {
	for _, s := range r.Sessions {
		if err := ValidateID("session_id", s.SessionID); err != nil {
			return err
		}
	}
	return nil
}

// SessionRun is one run of a session as SessionReply shows it.
type SessionRun struct {
	RunID  string     `json:"run_id" msgpack:"run_id"`
	Status RunState   `json:"status,omitempty" msgpack:"status,omitempty"`
	Turns  int        `json:"turns,omitempty" msgpack:"turns,omitempty"`
	Usage  loop.Usage `json:"usage" msgpack:"usage"`
}

// SessionExportLine is one line of a session's export: an entry of its
// transcript with the run that added it.
type SessionExportLine struct {
	RunID string     `json:"run_id" msgpack:"run_id"`
	Entry loop.Entry `json:"entry" msgpack:"entry"`
}

// SessionExportReply answers <p>.api.session.<id>.export: every entry, in
// order (GET /v1/sessions/{id}/export writes them as JSON lines).
type SessionExportReply struct {
	SessionID string              `json:"session_id" msgpack:"session_id"`
	Lines     []SessionExportLine `json:"lines" msgpack:"lines"`
}

// Validate checks the session id.
func (r *SessionExportReply) Validate() error { return ValidateID("session_id", r.SessionID) }

// SessionDeleteReply answers <p>.api.session.<id>.delete.
type SessionDeleteReply struct {
	Deleted bool `json:"deleted" msgpack:"deleted"`
}

// Validate accepts any reply.
func (r *SessionDeleteReply) Validate() error { return nil }

// SessionTrimRequest is the body of <p>.api.session.<id>.trim: the tool
// results of all but the last KeepRuns runs are cut to KeepChars
// characters.
type SessionTrimRequest struct {
	KeepChars int `json:"keep_chars" msgpack:"keep_chars"`
	KeepRuns  int `json:"keep_runs" msgpack:"keep_runs"`
}

// Validate rejects negative numbers.
func (r *SessionTrimRequest) Validate() error {
	if r.KeepChars < 0 {
		return &FieldError{Field: "keep_chars", Reason: "must not be negative"}
	}
	if r.KeepRuns < 0 {
		return &FieldError{Field: "keep_runs", Reason: "must not be negative"}
	}
	return nil
}

// SessionTrimReply answers a trim with the number of tool results cut.
type SessionTrimReply struct {
	Trimmed int `json:"trimmed" msgpack:"trimmed"`
}

// Validate accepts any reply.
func (r *SessionTrimReply) Validate() error { return nil }
