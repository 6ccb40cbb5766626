package store

import (
	"context"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// Parking is what a parked run's record keeps: the gated call it waits on,
// when waiting ends in a denial, and the request that resumes it
// (if_run_exists resume), encoded as its content type says.
type Parking struct {
	CallID      string    `json:"call_id" msgpack:"call_id"`
	Deadline    time.Time `json:"deadline" msgpack:"deadline"`
	Request     []byte    `json:"request" msgpack:"request"`
	ContentType string    `json:"content_type" msgpack:"content_type"`
	// Continues is the stream sequence of the request whose claim parked
	// the run (the resume request continues its submission). It names
	// the park: the wake request's message id is made from it.
	Continues uint64 `json:"continues" msgpack:"continues"`
	// TimerRevision is the revision of the park timer set for this park.
	TimerRevision uint64 `json:"timer_revision" msgpack:"timer_revision"`
	// LastSeq is the seq of the run's last event when it parked: the
	// resumed run continues after it even if the events stream has
	// dropped the run's events meanwhile (past its max age).
	LastSeq uint64 `json:"last_seq" msgpack:"last_seq"`
	// Trace is the W3C trace context of the parking request: the wake
	// request carries it, so the resumed run continues the submit's trace.
	Trace bus.TraceContext `json:"trace,omitzero" msgpack:"trace,omitempty"`
}

// Park timers: one key per parked run, so that every worker can watch the
// deadlines without reading every run record.
//
//	runs  =park.<run>         the deadline of a parked run's approval
//	      <run>.ask.<call>    when a gated call's approval wait ends
//
// ("=" is not allowed in run ids, so no run's keys can match =park.*.)
const parkPrefix = "=park."

func parkKey(run string) string { return parkPrefix + run }

// SetParkTimer records a parked run's deadline and returns the timer's
// revision.
func (c *Control) SetParkTimer(ctx context.Context, runID string, deadline time.Time) (uint64, error) {
	if err := checkID("park", "run id", runID); err != nil {
		return 0, err
	}
	val, err := msgpack.Marshal(deadline.UTC())
	if err != nil {
		return 0, err
	}
	rev, err := c.b.put(ctx, parkKey(runID), val)
	return rev, wrapErr("park", runID, err)
}

// ParkTimerRevision returns the revision of a run's park timer, 0 when it
// has none.
func (c *Control) ParkTimerRevision(ctx context.Context, runID string) (uint64, error) {
	e, err := c.b.get(ctx, parkKey(runID))
	if isNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, wrapErr("park timer", runID, err)
	}
	return e.Revision(), nil
}

// ClearParkTimer removes a run's park timer: the one at revision rev, or
// whichever is there when rev is 0. A timer set again since rev stays.
func (c *Control) ClearParkTimer(ctx context.Context, runID string, rev uint64) error {
	return wrapErr("park timer clear", runID, c.b.clearKey(ctx, parkKey(runID), rev))
}

// ParkTimer is one park timer change.
type ParkTimer struct {
	RunID    string
	Deadline time.Time
	// Revision is the timer's KV revision (for ClearParkTimer).
	Revision uint64
	// Deleted is set when the timer was cleared.
	Deleted bool
}

// WatchParkTimers streams park timer changes, starting with the current
// timers, until ctx ends.
func (c *Control) WatchParkTimers(ctx context.Context) (<-chan ParkTimer, error) {
	return watchKeys(ctx, c.b, parkPrefix+"*", "watch park timers", func(e jetstream.KeyValueEntry) (ParkTimer, bool) {
		t := ParkTimer{RunID: strings.TrimPrefix(e.Key(), parkPrefix), Revision: e.Revision(), Deleted: e.Operation() != jetstream.KeyValuePut}
		if !t.Deleted && msgpack.Unmarshal(e.Value(), &t.Deadline) != nil {
			return ParkTimer{}, false
		}
		return t, true
	})
}

// askRecord is a gated call's approval deadline.
type askRecord struct {
	Deadline   time.Time `msgpack:"deadline"`
	Submission int       `msgpack:"submission"`
}

// ApprovalDeadline returns when the approval wait of a gated call of the
// run's given submission ends: the deadline stored when the call was first
// asked about, or, for the first ask, deadline (stored now). A wait resumed
// on another worker — after a park or a crash — keeps the first deadline
// instead of starting over.
func (c *Control) ApprovalDeadline(ctx context.Context, runID string, submission int, callID string, deadline time.Time) (time.Time, error) {
	key := strings.Replace(callKey(runID, callID), ".ap.", ".ask.", 1)
	submission = max(submission, 1)
	got, _, err := createOnce(ctx, c.b, "approval deadline", runID, key, &askRecord{Deadline: deadline.UTC(), Submission: submission}, submission)
	if err != nil {
		return deadline, err
	}
	return got.Deadline, nil
}
