package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// RunStatus is a run's status in the index, as the status reply names it
// (docs/protocol.md#run-status).
type RunStatus string

// Run statuses.
const (
	RunQueued    RunStatus = "queued"
	RunRunning   RunStatus = "running"
	RunCompleted RunStatus = "completed"
	RunFailed    RunStatus = "failed"
	// RunParked is a run that waits for an approval decision on no
	// worker: its state is in the checkpoint, and a decision or the
	// approval deadline publishes its Parking.Request again, a cancel
	// fails it (the status reply says "running").
	RunParked RunStatus = "parked"
)

// Ended reports whether the status is final: completed or failed.
func (s RunStatus) Ended() bool { return s == RunCompleted || s == RunFailed }

// RunRecord is a run's entry in the index: the fields of the status reply
// (`<p>.api.run.<run_id>.status`) plus timestamps and the request's
// metadata. Its JSON encoding is the status reply's.
type RunRecord struct {
	RunID     string `json:"run_id" msgpack:"run_id"`
	Agent     string `json:"agent" msgpack:"agent"`
	SessionID string `json:"session_id,omitempty" msgpack:"session_id,omitempty"`
	// ParentRunID is the run that started this one (a subagent's
	// parent), from the request metadata key "parent_run_id".
	ParentRunID string    `json:"parent_run_id,omitempty" msgpack:"parent_run_id,omitempty"`
	Status      RunStatus `json:"status" msgpack:"status"`
	// Worker is the worker that owns (or last owned) the run.
	Worker string `json:"worker,omitempty" msgpack:"worker,omitempty"`
	// Attempt counts the claims of the run, 1 for the first.
	Attempt int `json:"attempt" msgpack:"attempt"`
	Turns   int `json:"turns" msgpack:"turns"`
	// Result is the output of a completed run.
	Result any `json:"result,omitempty" msgpack:"result,omitempty"`
	// Usage and FinalAgent describe a completed run.
	Usage      *loop.Usage `json:"usage,omitempty" msgpack:"usage,omitempty"`
	FinalAgent string      `json:"final_agent,omitempty" msgpack:"final_agent,omitempty"`
	// FinishReason is the last model turn's finish reason, if reported.
	FinishReason *string `json:"finish_reason,omitempty" msgpack:"finish_reason,omitempty"`
	// Submissions counts the submissions of the run (1 for the first).
	Submissions int `json:"submissions,omitempty" msgpack:"submissions,omitempty"`
	// RequestSeq is the runs-stream sequence of the current submission's
	// request, 0 until its publisher (or the claiming worker) records it.
	// A queued run whose request the stream no longer holds was lost.
	RequestSeq uint64 `json:"request_seq,omitempty" msgpack:"request_seq,omitempty"`
	// Quiet is set by a run's first submission and cleared, before it is
	// stored, by any cancel request or mailbox message for the run, and by
	// the run's first claim: a claim whose compare-and-set succeeds on a
	// quiet record knows there is neither to read.
	Quiet bool `json:"quiet,omitempty" msgpack:"quiet,omitempty"`
	// Requeues counts the times the current submission's request was
	// published again because the stream had lost it.
	Requeues int `json:"requeues,omitempty" msgpack:"requeues,omitempty"`
	// Parked holds what wakes a parked run; Wakes counts the wakes of the
	// current submission (each one publishes a request of its own).
	Parked *Parking `json:"parked,omitempty" msgpack:"parked,omitempty"`
	Wakes  int      `json:"wakes,omitempty" msgpack:"wakes,omitempty"`
	// Attempts is the run's history, the last MaxAttempts steps (claims,
	// resumes, parks, wakes, releases, outcomes) the lifecycle
	// transitions appended; AttemptsDropped counts the older ones.
	Attempts        []Attempt `json:"attempts,omitempty" msgpack:"attempts,omitempty"`
	AttemptsDropped int       `json:"attempts_dropped,omitempty" msgpack:"attempts_dropped,omitempty"`
	// Registry is the agents-registry revision the current submission
	// runs (pinned at its first claim; 0 for a worker serving a fixed
	// agents file): a resume on any worker uses the agents of it.
	Registry uint64 `json:"registry_revision,omitempty" msgpack:"registry_revision,omitempty"`
	// Version is the agent version the current submission started on
	// (set by its first claim from the claiming worker's version of the
	// agent: catalog.VersionOf; "" for a record written before versions,
	// or by a worker that gives none). A resume on a worker of another
	// version says so in its history step ([Attempt.Version]) and its
	// run_resumed event.
	Version string `json:"version,omitempty" msgpack:"version,omitempty"`
	// Error describes why a run failed.
	Error    *loop.ErrorInfo `json:"error,omitempty" msgpack:"error,omitempty"`
	Metadata map[string]any  `json:"metadata,omitempty" msgpack:"metadata,omitempty"`
	// InputDigest identifies the input the current submission was given
	// (lifecycle.InputDigest; "" when unknown: a raw publish, a record of
	// an earlier release): a completed run submitted again with another
	// input says so in its replay.
	InputDigest string `json:"input_digest,omitempty" msgpack:"input_digest,omitempty"`

	CreatedAt  time.Time `json:"created_at" msgpack:"created_at"`
	UpdatedAt  time.Time `json:"updated_at" msgpack:"updated_at"`
	StartedAt  time.Time `json:"started_at,omitzero" msgpack:"started_at,omitempty"`
	FinishedAt time.Time `json:"finished_at,omitzero" msgpack:"finished_at,omitempty"`
}

// ApplyTerminal records a run's terminal event (a *loop.RunCompleted or
// *loop.RunFailed; other events change nothing) as its outcome, finished at
// at.
func (r *RunRecord) ApplyTerminal(ev loop.Event, at time.Time) {
	switch e := ev.(type) {
	case *loop.RunCompleted:
		r.Status, r.Result, r.Turns, r.Error = RunCompleted, jsonValue(e.Output), e.Turns, nil
		r.Usage, r.FinalAgent, r.FinishReason = &e.Usage, e.FinalAgent, e.FinishReason
	case *loop.RunFailed:
		info := e.Error
		r.Status, r.Error = RunFailed, &info
	default:
		return
	}
	r.FinishedAt = at
}

// RunEntry is a record with the KV revision it was read or written at, the
// token of the next compare-and-set.
type RunEntry struct {
	Record   RunRecord
	Revision uint64
	chunks   string
}

// Chunked reports whether the record is stored in chunks (too large for
// one message). An entry built from a record and its revision, not read
// or written by Runs, is taken to be stored in one piece.
func (e *RunEntry) Chunked() bool { return e.chunks != "" }

// Runs is the run index on a KV bucket, one key per run (<run>.rec), every
// change a compare-and-set on its revision. It is safe for concurrent use.
type Runs struct {
	b       *bucket
	retries int
	now     func() time.Time
	// retention is how long an ended run's record is kept after its last
	// write (Config.Retention; 0: for ever).
	retention time.Duration
}

// ttl is the Nats-TTL a write of rec carries: the retention age for an
// ended run (its record expires that long after its last change, and
// [Reaper] then removes the run's other keys), none for a live one (a
// queued, running or parked run never expires, however long it waits).
func (r *Runs) ttl(rec *RunRecord) time.Duration {
	if rec.Status.Ended() {
		return r.retention
	}
	return 0
}

func runKey(run string) string { return run + ".rec" }

// Create indexes a new run. Empty Status becomes queued; zero CreatedAt and
// UpdatedAt become now. It fails with ErrRunExists when the run is indexed.
func (r *Runs) Create(ctx context.Context, rec RunRecord) (*RunEntry, error) {
	const op = "run create"
	if err := checkID(op, "run id", rec.RunID); err != nil {
		return nil, err
	}
	rec = Created(rec, r.now())
	frame, chunks, err := r.b.encode(ctx, rec.RunID, &rec)
	if err != nil {
		return nil, wrapErr(op, rec.RunID, err)
	}
	rev, err := r.b.createTTL(ctx, runKey(rec.RunID), frame, r.ttl(&rec))
	if err != nil {
		if isCAS(err) {
			r.b.purgeQuietly(ctx, chunks)
			return nil, fmt.Errorf("store: %s %s: %w: %w", op, rec.RunID, ErrRunExists, err)
		}
		return nil, wrapErr(op, rec.RunID, err)
	}
	return &RunEntry{Record: rec, Revision: rev, chunks: chunks}, nil
}

// Created is rec as Create stores it when it creates it at now: queued
// when its Status is empty, CreatedAt and UpdatedAt now (in UTC) when
// zero, and every step of its history without a time stamped now. Given
// a record Create was passed without times (lifecycle.Submit's) and the
// CreatedAt it returned, Created rebuilds the stored record exactly (see
// lifecycle.Submitted).
func Created(rec RunRecord, now time.Time) RunRecord {
	now = now.UTC()
	if rec.Status == "" {
		rec.Status = RunQueued
	}
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = now
	}
	if rec.UpdatedAt.IsZero() {
		rec.UpdatedAt = now
	}
	stampAttempts(&rec, now)
	return rec
}

// Get reads a run's record; ErrRunNotFound when the run is not indexed.
func (r *Runs) Get(ctx context.Context, runID string) (*RunEntry, error) {
	const op = "run get"
	if err := checkID(op, "run id", runID); err != nil {
		return nil, err
	}
	for range 3 {
		e, err := r.b.get(ctx, runKey(runID))
		if isNotFound(err) {
			return nil, fmt.Errorf("store: %s %s: %w", op, runID, ErrRunNotFound)
		}
		if err != nil {
			return nil, wrapErr(op, runID, err)
		}
		out := &RunEntry{Revision: e.Revision()}
		out.chunks, err = r.b.decode(ctx, e.Value(), &out.Record)
		if errors.Is(err, errMissingChunk) {
			continue // replaced while we read it
		}
		if errors.Is(err, ErrCorrupt) {
			return nil, fmt.Errorf("store: %s %s: %w", op, runID, err)
		}
		if err != nil {
			return nil, wrapErr(op, runID, err)
		}
		r := &out.Record
		r.CreatedAt, r.UpdatedAt, r.StartedAt, r.FinishedAt = utc(r.CreatedAt), utc(r.UpdatedAt), utc(r.StartedAt), utc(r.FinishedAt)
		return out, nil
	}
	return nil, fmt.Errorf("store: %s %s: %w: the record keeps changing", op, runID, ErrConflict)
}

// Update writes e.Record if the stored revision is still e.Revision, and
// moves e to the new revision. UpdatedAt becomes now. A lost
// compare-and-set fails with ErrConflict: read again and retry, or use
// Modify.
func (r *Runs) Update(ctx context.Context, e *RunEntry) error {
	const op = "run update"
	if err := checkID(op, "run id", e.Record.RunID); err != nil {
		return err
	}
	rec := e.Record
	rec.UpdatedAt = r.now().UTC()
	stampAttempts(&rec, rec.UpdatedAt)
	frame, chunks, err := r.b.encode(ctx, rec.RunID, &rec)
	if err != nil {
		return wrapErr(op, rec.RunID, err)
	}
	rev, err := r.b.updateTTL(ctx, runKey(rec.RunID), frame, e.Revision, r.ttl(&rec))
	if err != nil {
		if isCAS(err) {
			r.b.purgeQuietly(ctx, chunks)
		}
		return wrapErr(op, rec.RunID, err)
	}
	r.b.purgeQuietly(ctx, e.chunks)
	e.Record, e.Revision, e.chunks = rec, rev, chunks
	return nil
}

// Modify applies fn to the run's current record and writes the result with a
// compare-and-set, reading again and re-applying fn when another writer got
// there first (up to Config.CASRetries times). An error from fn is returned
// as is, and nothing is written.
func (r *Runs) Modify(ctx context.Context, runID string, fn func(*RunRecord) error) (*RunEntry, error) {
	for attempt := 0; ; attempt++ {
		e, err := r.Get(ctx, runID)
		if err != nil {
			return nil, err
		}
		if err := fn(&e.Record); err != nil {
			return nil, err
		}
		e.Record.RunID = runID
		err = r.Update(ctx, e)
		if err == nil {
			return e, nil
		}
		if !errors.Is(err, ErrConflict) || attempt >= r.retries {
			return nil, err
		}
	}
}

// Delete removes the run from the index; an unknown run is not an error.
func (r *Runs) Delete(ctx context.Context, runID string) error {
	const op = "run delete"
	if err := checkID(op, "run id", runID); err != nil {
		return err
	}
	return wrapErr(op, runID, r.b.purge(ctx, runID+".>"))
}

// Unquiet clears the run's Quiet flag (a compare-and-set), before a cancel
// request or a mailbox message for the run is stored: a claim of the
// record it read quiet then fails its compare-and-set and reads both. A
// run without a record, or whose record is not quiet, is left alone.
func (r *Runs) Unquiet(ctx context.Context, runID string) error {
	for range 5 {
		e, err := r.Get(ctx, runID)
		if errors.Is(err, ErrRunNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if !e.Record.Quiet {
			return nil
		}
		e.Record.Quiet = false
		err = r.Update(ctx, e)
		if !errors.Is(err, ErrConflict) {
			return err
		}
	}
	return wrapErr("run unquiet", runID, ErrConflict)
}

// jsonValue is a run's output as the record keeps it: a Go value (a code
// agent's typed output) as its JSON value, what its run_completed event
// carries (bus.JSONValue); one JSON cannot encode as it is.
func jsonValue(v any) any {
	if out, err := bus.JSONValue(v); err == nil {
		return out
	}
	return v
}
