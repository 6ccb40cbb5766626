package store

import (
	"context"
	"encoding/hex"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// RunChangeKind says what a [RunChange] reports.
type RunChangeKind int

// Kinds of run changes.
const (
	// ChangeRecord is a run record written (or deleted).
	ChangeRecord RunChangeKind = iota + 1
	// ChangeAsk is a gated call's approval wait beginning: the worker
	// stored when it ends (Control.ApprovalDeadline) as it began to wait.
	ChangeAsk
	// ChangeDecision is an approval decision stored for a call.
	ChangeDecision
	// ChangeCaughtUp follows the last of the values stored when the watch
	// began; what follows is live.
	ChangeCaughtUp
)

// RunChange is one change of the run index bucket, as [Runs.Watch] reports
// it.
type RunChange struct {
	Kind  RunChangeKind
	RunID string
	// Record is the run's record (ChangeRecord, nil when Deleted),
	// without its Result, Metadata, Attempts and Parked.Request, which a
	// listing does not need: read the run with Get for those.
	Record *RunRecord
	// CallKey is the call's key token (ChangeAsk, ChangeDecision), the
	// same for the ask and the decision of one call; CallID is the call's
	// id.
	CallKey, CallID string
	// Deadline is when the call's approval wait ends (ChangeAsk).
	Deadline time.Time
	// Submission is the run's submission the ask or decision belongs to.
	Submission int
	// Deleted is set when the key was deleted or purged.
	Deleted  bool
	Revision uint64
}

// runSummary is the part of a stored RunRecord a listing decodes: msgpack
// skips the other fields (the result, the metadata, the parked request)
// without building them.
type runSummary struct {
	RunID        string          `msgpack:"run_id"`
	Agent        string          `msgpack:"agent"`
	SessionID    string          `msgpack:"session_id,omitempty"`
	ParentRunID  string          `msgpack:"parent_run_id,omitempty"`
	Status       RunStatus       `msgpack:"status"`
	Worker       string          `msgpack:"worker,omitempty"`
	Attempt      int             `msgpack:"attempt"`
	Turns        int             `msgpack:"turns"`
	FinalAgent   string          `msgpack:"final_agent,omitempty"`
	Submissions  int             `msgpack:"submissions,omitempty"`
	Parked       *parkedSummary  `msgpack:"parked,omitempty"`
	Error        *loop.ErrorInfo `msgpack:"error,omitempty"`
	CreatedAt    time.Time       `msgpack:"created_at"`
	UpdatedAt    time.Time       `msgpack:"updated_at"`
	StartedAt    time.Time       `msgpack:"started_at,omitempty"`
	FinishedAt   time.Time       `msgpack:"finished_at,omitempty"`
	FinishReason *string         `msgpack:"finish_reason,omitempty"`
}

type parkedSummary struct {
	CallID   string    `msgpack:"call_id"`
	Deadline time.Time `msgpack:"deadline"`
}

func (s *runSummary) record() *RunRecord {
	r := &RunRecord{
		RunID: s.RunID, Agent: s.Agent, SessionID: s.SessionID, ParentRunID: s.ParentRunID, Status: s.Status,
		Worker: s.Worker, Attempt: s.Attempt, Turns: s.Turns, FinalAgent: s.FinalAgent, Submissions: s.Submissions,
		Error: s.Error, FinishReason: s.FinishReason,
		CreatedAt: utc(s.CreatedAt), UpdatedAt: utc(s.UpdatedAt), StartedAt: utc(s.StartedAt), FinishedAt: utc(s.FinishedAt),
	}
	if s.Parked != nil {
		r.Parked = &Parking{CallID: s.Parked.CallID, Deadline: utc(s.Parked.Deadline)}
	}
	return r
}

// Watch streams the changes of the run index: every record, approval
// wait and decision stored when it begins (then a ChangeCaughtUp), and
// every change after, until ctx ends or the connection closes (the
// channel closes). It is how a process keeps a view of every run without
// reading each one: one ordered consumer on the bucket, no writes.
//
// A purge of a run's keys (Runs.Delete) removes them without a marker a
// watch could see.
func (r *Runs) Watch(ctx context.Context) (<-chan RunChange, error) {
	w, err := r.b.kv.WatchFiltered(ctx, []string{"*.rec", "*.ask.*", "*.ap.*"})
	if err != nil {
		return nil, wrapErr("watch runs", r.b.name, err)
	}
	out := make(chan RunChange, 256)
	go func() {
		defer close(out)
		defer stopWatch(w)
		for {
			var e jetstream.KeyValueEntry
			var ok bool
			select {
			case <-ctx.Done():
				return
			case e, ok = <-w.Updates():
				if !ok {
					return
				}
			}
			c := RunChange{Kind: ChangeCaughtUp}
			if e != nil {
				if c, ok = r.change(ctx, e); !ok {
					continue
				}
			}
			select {
			case out <- c:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// change decodes one entry of the watch; false skips it (a key of another
// shape, a value that does not decode).
func (r *Runs) change(ctx context.Context, e jetstream.KeyValueEntry) (RunChange, bool) {
	key := e.Key()
	run, rest, ok := strings.Cut(key, ".")
	if !ok || !validID(run) {
		return RunChange{}, false
	}
	c := RunChange{RunID: run, Revision: e.Revision(), Deleted: e.Operation() != jetstream.KeyValuePut}
	switch {
	case rest == "rec":
		c.Kind = ChangeRecord
		if c.Deleted {
			return c, true
		}
		var s runSummary
		if _, err := r.b.decode(ctx, e.Value(), &s); err != nil {
			r.b.log.Warn("store: run index watch: a record does not decode; it is left out of the listing", "run_id", run, "error", err.Error())
			return RunChange{}, false
		}
		c.Record = s.record()
		c.Record.RunID = run
		return c, true
	case strings.HasPrefix(rest, "ask."):
		c.Kind, c.CallKey = ChangeAsk, strings.TrimPrefix(rest, "ask.")
		if !c.Deleted {
			var a askRecord
			if msgpack.Unmarshal(e.Value(), &a) != nil {
				return RunChange{}, false
			}
			c.Deadline, c.Submission = utc(a.Deadline), max(a.Submission, 1)
		}
	case strings.HasPrefix(rest, "ap."):
		c.Kind, c.CallKey = ChangeDecision, strings.TrimPrefix(rest, "ap.")
		if !c.Deleted {
			var d ApprovalDecision
			if msgpack.Unmarshal(e.Value(), &d) != nil {
				return RunChange{}, false
			}
			c.Submission = max(d.Submission, 1)
		}
	default:
		return RunChange{}, false
	}
	if strings.Contains(c.CallKey, ".") {
		return RunChange{}, false // a chunk, not a control record
	}
	c.CallID = CallIDOfKey(c.CallKey)
	return c, true
}

// CallIDOfKey is the call id a control key token names: call ids outside
// [A-Za-z0-9_-] (or longer than 100) are stored hex-encoded behind an "h".
func CallIDOfKey(tok string) string {
	if hexed, ok := strings.CutPrefix(tok, "h"); ok {
		if b, err := hex.DecodeString(hexed); err == nil && (!validID(string(b)) || len(b) > 100) {
			return string(b)
		}
	}
	return tok
}

// CallKeyOf is the key token a call id is stored under (RunChange.CallKey).
func CallKeyOf(callID string) string { return strings.TrimPrefix(callKey("r", callID), "r.ap.") }
