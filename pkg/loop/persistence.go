package loop

import (
	"context"
	"time"
)

// RunStatus is the status of a stored run.
type RunStatus string

// Run statuses. running, interrupted and failed snapshots are resumable; a
// completed one replays.
const (
	StatusRunning     RunStatus = "running"
	StatusInterrupted RunStatus = "interrupted"
	StatusFailed      RunStatus = "failed"
	StatusCompleted   RunStatus = "completed"
)

// RunHead is the small, overwritten part of a checkpoint.
type RunHead struct {
	// Agent is the active agent's name (after a handoff, the target).
	Agent           string         `json:"agent_name" msgpack:"agent_name"`
	Usage           Usage          `json:"usage" msgpack:"usage"`
	Turns           int            `json:"turns" msgpack:"turns"`
	Status          RunStatus      `json:"status" msgpack:"status"`
	Output          any            `json:"output,omitempty" msgpack:"output,omitempty"`
	Error           *ErrorInfo     `json:"error,omitempty" msgpack:"error,omitempty"`
	LastInputTokens int64          `json:"last_input_tokens,omitempty" msgpack:"last_input_tokens,omitempty"`
	ContextState    map[string]any `json:"context_state,omitempty" msgpack:"context_state,omitempty"`
	UpdatedAt       time.Time      `json:"updated_at" msgpack:"updated_at"`
}

// Snapshot is a stored run: this run's own entries (never the system head,
// never session history) and its head.
type Snapshot struct {
	RunID   string  `json:"run_id" msgpack:"run_id"`
	Entries []Entry `json:"entries" msgpack:"entries"`
	RunHead `msgpack:",inline"`
	// Revision is the store's write revision of this snapshot, for fencing:
	// a writer passes the revision it last saw to Checkpointer.Append.
	Revision uint64 `json:"revision,omitempty" msgpack:"revision,omitempty"`
}

// CheckpointWrite is one append to a run's checkpoint.
type CheckpointWrite struct {
	// Base is the number of entries the writer knows are stored; Entries go
	// after them. A store may refuse a Base that disagrees with what it holds.
	Base int
	// Entries are the new entries, possibly none.
	Entries []Entry
	// Head replaces the stored head.
	Head RunHead
	// Revision is the revision the writer last saw (from Load or the last
	// Append); 0 means the run must not exist yet.
	Revision uint64
}

// Checkpointer stores the log of in-flight runs, keyed globally by run id.
// A checkpoint is an append-only entry log plus a small head, so a store can
// write O(new entries) per checkpoint instead of rewriting the snapshot.
//
// Append is conditional: when the stored revision differs from
// w.Revision (another writer took the run over), it writes nothing and
// returns an error matching ErrFenced; the writer must stop. On success it
// returns the new revision. Load returns an error matching ErrNoSnapshot when
// nothing is stored. Delete is idempotent. Implementations are safe for
// concurrent use; stored entries are never rewritten.
type Checkpointer interface {
	Load(ctx context.Context, runID string) (*Snapshot, error)
	Append(ctx context.Context, runID string, w CheckpointWrite) (revision uint64, err error)
	Delete(ctx context.Context, runID string) error
}

// Segment is one completed run's contribution to a session.
type Segment struct {
	RunID   string         `json:"run_id" msgpack:"run_id"`
	Entries []Entry        `json:"entries" msgpack:"entries"`
	Meta    map[string]any `json:"meta,omitempty" msgpack:"meta,omitempty"`
}

// Session stores conversations as append-only logs of completed runs.
//
// Append is idempotent by (sessionID, RunID): appending a run id that is
// already present is a no-op (the first write wins); an empty RunID is
// generated and returned. Segments returns them in insertion order (an empty
// slice for an unknown session). Rewind keeps the first keepEntries flat
// entries: later segments are deleted and the segment the cut lands in is
// truncated, made tool-consistent and loses its meta; it returns the number
// of entries removed. TrimToolResults shortens tool outputs longer than
// keepChars in all but the last keepRuns segments (see TrimToolOutput) and
// returns how many were trimmed. Implementations are safe for concurrent use.
type Session interface {
	Segments(ctx context.Context, sessionID string) ([]Segment, error)
	Append(ctx context.Context, sessionID string, seg Segment) (runID string, err error)
	Clear(ctx context.Context, sessionID string) error
	Rewind(ctx context.Context, sessionID string, keepEntries int) (removed int, err error)
	TrimToolResults(ctx context.Context, sessionID string, keepChars, keepRuns int) (trimmed int, err error)
}

// LoadSession returns a session's entries flattened in segment order.
func LoadSession(ctx context.Context, s Session, sessionID string) ([]Entry, error) {
	segs, err := s.Segments(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	n := 0
	for i := range segs {
		n += len(segs[i].Entries)
	}
	out := make([]Entry, 0, n)
	for i := range segs {
		out = append(out, segs[i].Entries...)
	}
	return out, nil
}

// MailMessage is a steering message queued for a run's next turn.
type MailMessage struct {
	Token   string `json:"token" msgpack:"token"`
	Content string `json:"content" msgpack:"content"`
	Parts   []Part `json:"parts,omitempty" msgpack:"parts,omitempty"`
}

// Mailbox queues steering messages for one run. Push returns a token that
// Remove takes to withdraw a message that was not drained yet. Drain takes
// every queued message, FIFO, destructively: a drained message is gone and is
// never returned twice. Implementations are safe for concurrent use.
type Mailbox interface {
	Push(ctx context.Context, msg MailMessage) (token string, err error)
	Remove(ctx context.Context, token string) (removed bool, err error)
	Drain(ctx context.Context) ([]MailMessage, error)
}

// MailboxPeeker is implemented by durable mailboxes. The loop then reads
// the queued messages without taking them (Peek), checkpoints them into
// the transcript (each injected entry carries its token as Entry.ID), and
// only then deletes them (Ack). A crash in between leaves the messages
// queued, and the resumed run recognizes the ones it already holds by
// token: every message is applied exactly once, and none is lost. A
// message the run has peeked is the run's: Remove reports false for it
// from then on (the store marks it), so a withdrawal never names a message
// the run applies.
type MailboxPeeker interface {
	Peek(ctx context.Context) ([]MailMessage, error)
	Ack(ctx context.Context, tokens []string) error
}
