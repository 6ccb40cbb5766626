package bus

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Run list statuses: a listing tells a parked run (waiting for a decision
// on no worker) from a running one, unlike the status reply.
const StateParked RunState = "parked"

// ListStates are the statuses a run listing filters and counts by.
func ListStates() []RunState {
	return []RunState{StateQueued, StateRunning, StateParked, StateCompleted, StateFailed}
}

// Run list limits: a listing returns DefaultListLimit runs unless told,
// and never more than MaxListLimit.
const (
	DefaultListLimit = 50
	MaxListLimit     = 500
)

// RunsListRequest is the body of <p>.api.runs.list: the filters, all
// optional and combined with "and", and the page.
type RunsListRequest struct {
	Agent string `json:"agent,omitempty" msgpack:"agent,omitempty"`
	// Status keeps runs in any of these statuses (ListStates); an element
	// may itself be a comma-separated list, and a body may give one
	// string instead of a list.
	Status  StatusFilter `json:"status,omitempty" msgpack:"status,omitempty"`
	Session string       `json:"session,omitempty" msgpack:"session,omitempty"`
	Worker  string       `json:"worker,omitempty" msgpack:"worker,omitempty"`
	// Parent keeps the children of a run (their parent_run_id).
	Parent string `json:"parent,omitempty" msgpack:"parent,omitempty"`
	// Schedule keeps the fires of this schedule (run ids
	// sched-<schedule>-<unix>).
	Schedule string `json:"schedule,omitempty" msgpack:"schedule,omitempty"`
	// Since and Until bound created_at: since ≤ created_at < until.
	Since time.Time `json:"since,omitzero" msgpack:"since,omitempty"`
	Until time.Time `json:"until,omitzero" msgpack:"until,omitempty"`
	// Awaiting keeps runs waiting for an approval decision or an answer
	// (parked, or running with a pending approval).
	Awaiting bool `json:"awaiting,omitempty" msgpack:"awaiting,omitempty"`
	// Limit is the page size: DefaultListLimit when 0, at most
	// MaxListLimit.
	Limit int `json:"limit,omitempty" msgpack:"limit,omitempty"`
	// Cursor is a reply's next_cursor: the page after it.
	Cursor string `json:"cursor,omitempty" msgpack:"cursor,omitempty"`
}

// StatusFilter is a listing's status filter: a list of statuses, or one
// string (which may be comma-separated) when decoded.
type StatusFilter []string

// UnmarshalJSON takes a list of strings or one string.
func (f *StatusFilter) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*f = StatusFilter{one}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("status: give a list of statuses or one string: %w", err)
	}
	*f = list
	return nil
}

// DecodeMsgpack takes a list of strings or one string.
func (f *StatusFilter) DecodeMsgpack(dec *msgpack.Decoder) error {
	v, err := dec.DecodeInterface()
	if err != nil {
		return err
	}
	switch v := v.(type) {
	case nil:
		*f = nil
	case string:
		*f = StatusFilter{v}
	case []any:
		out := make(StatusFilter, 0, len(v))
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return fmt.Errorf("status: give a list of statuses or one string, not %T", e)
			}
			out = append(out, s)
		}
		*f = out
	default:
		return fmt.Errorf("status: give a list of statuses or one string, not %T", v)
	}
	return nil
}

func runsListFields() []string {
	return []string{"agent", "awaiting", "cursor", "limit", "parent", "schedule", "session", "since", "status", "until", "worker"}
}

// States returns the status filter, split at commas and trimmed.
func (r *RunsListRequest) States() []RunState {
	var out []RunState
	for _, s := range r.Status {
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, RunState(p))
			}
		}
	}
	return out
}

// PageSize is Limit with its default.
func (r *RunsListRequest) PageSize() int {
	if r.Limit == 0 {
		return DefaultListLimit
	}
	return r.Limit
}

// Validate checks every filter, naming the known values of a bad one.
func (r *RunsListRequest) Validate() error {
	for _, f := range []struct{ name, v string }{{"agent", r.Agent}, {"session", r.Session}, {"worker", r.Worker}, {"parent", r.Parent}, {"schedule", r.Schedule}} {
		if f.v != "" {
			if err := ValidateID(f.name, f.v); err != nil {
				return err
			}
		}
	}
	known := ListStates()
	for _, s := range r.States() {
		if !slices.Contains(known, s) {
			names := make([]string, len(known))
			for i, k := range known {
				names[i] = string(k)
			}
			return &FieldError{Field: "status", Reason: fmt.Sprintf("unknown status %q; known statuses: %s", s, strings.Join(names, ", "))}
		}
	}
	if r.Limit < 0 || r.Limit > MaxListLimit {
		return &FieldError{Field: "limit", Reason: fmt.Sprintf("is %d; give 1 to %d (0 means %d)", r.Limit, MaxListLimit, DefaultListLimit)}
	}
	if !r.Since.IsZero() && !r.Until.IsZero() && !r.Since.Before(r.Until) {
		return &FieldError{Field: "until", Reason: "must be after since"}
	}
	if len(r.Cursor) > 512 {
		return &FieldError{Field: "cursor", Reason: "is not a cursor a listing returned"}
	}
	return nil
}

// DecodeRunsList decodes and validates a runs list request. Unknown
// fields are refused with the list of known ones; an empty body lists
// every run.
func DecodeRunsList(h nats.Header, body []byte) (*RunsListRequest, error) {
	req := &RunsListRequest{}
	if len(body) == 0 {
		return req, nil
	}
	enc, err := EncodingOf(h, body)
	if err != nil {
		return nil, err
	}
	keys, _ := topLevel(enc, body)
	known := runsListFields()
	for _, k := range keys {
		if !slices.Contains(known, k) {
			return nil, &FieldError{Field: k, Reason: "unknown field; known fields: " + strings.Join(known, ", ")}
		}
	}
	if _, err := DecodeControl(h, body, req); err != nil {
		return nil, err
	}
	return req, nil
}

// RunAwaiting is what a run waits for: a decision on a gated call
// (kind "approval") or an answer to ask_human (kind "question").
type RunAwaiting struct {
	Kind   string `json:"kind" msgpack:"kind"`
	CallID string `json:"call_id" msgpack:"call_id"`
	// Tool is the gated tool, when the run's events have named it.
	Tool     string `json:"tool" msgpack:"tool"`
	Question string `json:"question,omitempty" msgpack:"question,omitempty"`
	// Deadline is when no decision becomes a denial.
	Deadline time.Time `json:"deadline,omitzero" msgpack:"deadline,omitempty"`
	// Parked is set when the run waits parked, on no worker.
	Parked bool `json:"parked,omitempty" msgpack:"parked,omitempty"`
}

// Awaiting kinds.
const (
	AwaitApproval = "approval"
	AwaitQuestion = "question"
)

// RunSummary is one run of a listing.
type RunSummary struct {
	RunID       string          `json:"run_id" msgpack:"run_id"`
	Agent       string          `json:"agent" msgpack:"agent"`
	FinalAgent  string          `json:"final_agent,omitempty" msgpack:"final_agent,omitempty"`
	SessionID   string          `json:"session_id,omitempty" msgpack:"session_id,omitempty"`
	Status      RunState        `json:"status" msgpack:"status"`
	Worker      string          `json:"worker,omitempty" msgpack:"worker,omitempty"`
	Attempt     int             `json:"attempt" msgpack:"attempt"`
	Turns       int             `json:"turns" msgpack:"turns"`
	CreatedAt   time.Time       `json:"created_at" msgpack:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at" msgpack:"updated_at"`
	StartedAt   time.Time       `json:"started_at,omitzero" msgpack:"started_at,omitempty"`
	FinishedAt  time.Time       `json:"finished_at,omitzero" msgpack:"finished_at,omitempty"`
	ParentRunID string          `json:"parent_run_id,omitempty" msgpack:"parent_run_id,omitempty"`
	Awaiting    *RunAwaiting    `json:"awaiting,omitempty" msgpack:"awaiting,omitempty"`
	Error       *loop.ErrorInfo `json:"error,omitempty" msgpack:"error,omitempty"`
}

// RunCounts counts the runs matching a listing's filters but status, by
// status.
type RunCounts struct {
	Queued    int `json:"queued" msgpack:"queued"`
	Running   int `json:"running" msgpack:"running"`
	Parked    int `json:"parked" msgpack:"parked"`
	Completed int `json:"completed" msgpack:"completed"`
	Failed    int `json:"failed" msgpack:"failed"`
}

// RunsListReply answers <p>.api.runs.list: a page of runs, newest first
// (by created_at, then run_id), and the cursor of the next page ("" on
// the last).
type RunsListReply struct {
	Runs       []RunSummary `json:"runs" msgpack:"runs"`
	NextCursor string       `json:"next_cursor" msgpack:"next_cursor"`
	Counts     RunCounts    `json:"counts" msgpack:"counts"`
	// Horizon, when set, is the created_at of the newest ended run the
	// answering index dropped from its memory (it holds a bounded number
	// of ended runs): ended runs created at or before it may be missing
	// from the listing and its counts; status and describe still answer
	// them by id until retention expires them.
	Horizon *time.Time `json:"horizon,omitempty" msgpack:"horizon,omitempty"`
}

// Validate checks the run ids.
func (r *RunsListReply) Validate() error {
	for i, s := range r.Runs {
		if err := ValidateID(fmt.Sprintf("runs[%d].run_id", i), s.RunID); err != nil {
			return err
		}
	}
	return nil
}

// RunStep is one step of a run's history: a claim, a resume, a takeover,
// a park, a wake, a release, a requeue, an outcome.
type RunStep struct {
	N       int    `json:"n" msgpack:"n"`
	Kind    string `json:"kind" msgpack:"kind"`
	Attempt int    `json:"attempt" msgpack:"attempt"`
	Worker  string `json:"worker,omitempty" msgpack:"worker,omitempty"`
	// Version is the claiming worker's agent version (claim steps).
	Version string    `json:"version,omitempty" msgpack:"version,omitempty"`
	At      time.Time `json:"at" msgpack:"at"`
}

// RunDescription answers <p>.api.run.<run_id>.describe: the run's
// summary and status details, its history, what it awaits and its
// children.
type RunDescription struct {
	RunSummary
	// DurationMS is finished_at − started_at, or until now for a run
	// under way (0 before its start).
	DurationMS   int64         `json:"duration_ms" msgpack:"duration_ms"`
	Usage        *loop.Usage   `json:"usage,omitempty" msgpack:"usage,omitempty"`
	FinishReason *string       `json:"finish_reason,omitempty" msgpack:"finish_reason,omitempty"`
	Result       *StoredResult `json:"result,omitempty" msgpack:"result,omitempty"`
	Submissions  int           `json:"submissions" msgpack:"submissions"`
	Wakes        int           `json:"wakes,omitempty" msgpack:"wakes,omitempty"`
	// Attempts is the history, oldest first (the last ones kept;
	// AttemptsDropped counts the older).
	Attempts        []RunStep `json:"attempts" msgpack:"attempts"`
	AttemptsDropped int       `json:"attempts_dropped,omitempty" msgpack:"attempts_dropped,omitempty"`
	// Children are the runs whose parent_run_id is this run, newest
	// first.
	Children         []RunSummary `json:"children" msgpack:"children"`
	Waiting          string       `json:"waiting,omitempty" msgpack:"waiting,omitempty"`
	RegistryRevision uint64       `json:"registry_revision,omitempty" msgpack:"registry_revision,omitempty"`
	// Version is the agent version the current submission started on
	// (docs/protocol.md#agent-versions).
	Version string `json:"version,omitempty" msgpack:"version,omitempty"`
	// Metadata is the run request's metadata (a scheduled fire's
	// {"schedule": name}).
	Metadata map[string]any `json:"metadata,omitempty" msgpack:"metadata,omitempty"`
}

// Validate checks the run id.
func (r *RunDescription) Validate() error { return ValidateID("run_id", r.RunID) }
