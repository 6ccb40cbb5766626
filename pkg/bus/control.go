package bus

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Bodies of the request/reply subjects of docs/protocol.md#subjects. Each
// request type has a Validate method; decode any of them with
// DecodeControl, which detects the encoding, decodes and validates.

// RunState is a run's status in status and submit replies.
type RunState string

// Run states.
const (
	StateQueued    RunState = "queued"
	StateRunning   RunState = "running"
	StateCompleted RunState = "completed"
	StateFailed    RunState = "failed"
)

// SubmitReply answers <p>.api.submit.
type SubmitReply struct {
	RunID         string   `json:"run_id" msgpack:"run_id"`
	EventsSubject string   `json:"events_subject" msgpack:"events_subject"`
	Agent         string   `json:"agent" msgpack:"agent"`
	Status        RunState `json:"status" msgpack:"status"`
	// Replayed is true when the run had completed: nothing new runs and
	// Result is the stored result.
	Replayed bool          `json:"replayed,omitempty" msgpack:"replayed,omitempty"`
	Result   *StoredResult `json:"result,omitempty" msgpack:"result,omitempty"`
	// InputDiffers is true on a replay whose request gave another input
	// than the one the run completed with: that input was not run (submit
	// it under a new run id, or with if_run_exists restart).
	InputDiffers bool `json:"input_differs,omitempty" msgpack:"input_differs,omitempty"`
	// Injected is set when the request's session had a live run and its
	// input went to that run's mailbox (on_busy inject): RunID names that
	// run, and InjectToken the message (a withdraw takes it).
	Injected    bool   `json:"injected,omitempty" msgpack:"injected,omitempty"`
	InjectToken string `json:"inject_token,omitempty" msgpack:"inject_token,omitempty"`
	// QueuedBehind names the session's live run a queued request waits
	// for (on_busy queue): the run starts, under RunID, when that one ends.
	QueuedBehind string `json:"queued_behind,omitempty" msgpack:"queued_behind,omitempty"`
}

// Validate checks identifiers and the status.
func (r *SubmitReply) Validate() error {
	if err := ValidateID("run_id", r.RunID); err != nil {
		return err
	}
	return validState(r.Status)
}

// StoredResult is a completed run's result, as its run_completed event
// carried it.
type StoredResult struct {
	Output       any        `json:"output" msgpack:"output"`
	Usage        loop.Usage `json:"usage" msgpack:"usage"`
	Turns        int        `json:"turns" msgpack:"turns"`
	FinishReason *string    `json:"finish_reason" msgpack:"finish_reason"`
	FinalAgent   string     `json:"final_agent" msgpack:"final_agent"`
}

// ResultOf returns the stored form of a run_completed event.
func ResultOf(ev *loop.RunCompleted) *StoredResult {
	return &StoredResult{Output: ev.Output, Usage: ev.Usage, Turns: ev.Turns, FinishReason: ev.FinishReason, FinalAgent: ev.FinalAgent}
}

// StatusReply answers <p>.api.run.<run_id>.status.
type StatusReply struct {
	RunID     string          `json:"run_id" msgpack:"run_id"`
	Agent     string          `json:"agent" msgpack:"agent"`
	SessionID string          `json:"session_id" msgpack:"session_id"`
	Status    RunState        `json:"status" msgpack:"status"`
	Worker    string          `json:"worker" msgpack:"worker"`
	Attempt   int             `json:"attempt" msgpack:"attempt"`
	Turns     int             `json:"turns" msgpack:"turns"`
	Result    *StoredResult   `json:"result,omitempty" msgpack:"result,omitempty"`
	Error     *loop.ErrorInfo `json:"error,omitempty" msgpack:"error,omitempty"`
	Replayed  bool            `json:"replayed,omitempty" msgpack:"replayed,omitempty"`
	// Awaiting is set while the run waits, parked on no worker, for an
	// approval decision (docs/protocol.md#run-status).
	Awaiting *Awaiting `json:"awaiting,omitempty" msgpack:"awaiting,omitempty"`
	// Waiting says why a queued run is not running yet, when the fleet
	// knows: no live worker serves its agent.
	Waiting string `json:"waiting,omitempty" msgpack:"waiting,omitempty"`
	// RegistryRevision is the agents-registry revision the run's
	// submission runs, when its workers serve the registry.
	RegistryRevision uint64 `json:"registry_revision,omitempty" msgpack:"registry_revision,omitempty"`
	// ParentRunID is the run that started this one (a subagent's
	// parent), when its request's metadata named one
	// (docs/protocol.md#run-trees).
	ParentRunID string `json:"parent_run_id,omitempty" msgpack:"parent_run_id,omitempty"`
}

// Awaiting names what a parked run waits for.
type Awaiting struct {
	// CallID is the gated call waiting for a decision
	// (<p>.api.run.<id>.approve).
	CallID string `json:"call_id" msgpack:"call_id"`
	// Deadline is when no decision becomes a denial.
	Deadline time.Time `json:"deadline" msgpack:"deadline"`
}

// Validate checks identifiers and the status.
func (r *StatusReply) Validate() error {
	if err := ValidateID("run_id", r.RunID); err != nil {
		return err
	}
	if r.Attempt < 0 || r.Turns < 0 {
		return &FieldError{Field: "attempt", Reason: "attempt and turns must not be negative"}
	}
	return validState(r.Status)
}

func validState(s RunState) error {
	switch s {
	case StateQueued, StateRunning, StateCompleted, StateFailed:
		return nil
	}
	return &FieldError{Field: "status", Reason: fmt.Sprintf("%s is not queued, running, completed or failed", quote(string(s)))}
}

// ApproveRequest is the body of <p>.api.run.<run_id>.approve.
type ApproveRequest struct {
	CallID   string        `json:"call_id" msgpack:"call_id"`
	Decision loop.Decision `json:"decision" msgpack:"decision"`
	Reason   string        `json:"reason,omitempty" msgpack:"reason,omitempty"`
}

// Validate requires a call id and a known decision.
func (r *ApproveRequest) Validate() error {
	if r.CallID == "" {
		return &FieldError{Field: "call_id", Reason: "is required"}
	}
	if r.Decision != loop.Approve && r.Decision != loop.Reject {
		return &FieldError{Field: "decision", Reason: fmt.Sprintf("%s is not approve or reject", quote(string(r.Decision)))}
	}
	return nil
}

// ApproveReply is the reply of an approval: the decision in force.
type ApproveReply struct {
	RunID    string        `json:"run_id" msgpack:"run_id"`
	CallID   string        `json:"call_id" msgpack:"call_id"`
	Decision loop.Decision `json:"decision" msgpack:"decision"`
	Reason   string        `json:"reason,omitempty" msgpack:"reason,omitempty"`
	// Accepted is false when an earlier decision for the call stands.
	Accepted bool `json:"accepted" msgpack:"accepted"`
}

// Validate accepts any reply.
func (r *ApproveReply) Validate() error { return nil }

// CancelRequest is the body of <p>.api.run.<run_id>.cancel.
type CancelRequest struct {
	Reason string `json:"reason,omitempty" msgpack:"reason,omitempty"`
}

// Validate accepts any reason.
func (r *CancelRequest) Validate() error { return nil }

// CancelReply is the reply of a cancel: whether the run was still live to
// cancel, and its status.
type CancelReply struct {
	RunID     string `json:"run_id" msgpack:"run_id"`
	Cancelled bool   `json:"cancelled" msgpack:"cancelled"`
	Status    string `json:"status" msgpack:"status"`
}

// Validate accepts any reply.
func (r *CancelReply) Validate() error { return nil }

// InjectRequest is the body of <p>.api.run.<run_id>.inject: a steering
// message for the run's next turn.
type InjectRequest struct {
	Content string `json:"content" msgpack:"content"`
	// Key is an optional idempotency key (1–[MaxInjectKeyLen] bytes of
	// UTF-8): a second inject with the same key to the same run stores
	// nothing and answers the first inject's token, whether that message
	// is still queued, folded into the run or withdrawn — so a retry after
	// a lost reply, or the same report delivered twice, is applied once.
	Key string `json:"key,omitempty" msgpack:"key,omitempty"`
}

// MaxInjectKeyLen is the longest [InjectRequest.Key], in bytes.
const MaxInjectKeyLen = 256

// Validate requires content, and a key (when set) of at most
// [MaxInjectKeyLen] bytes of UTF-8.
func (r *InjectRequest) Validate() error {
	if r.Content == "" {
		return &FieldError{Field: "content", Reason: "is required"}
	}
	if len(r.Key) > MaxInjectKeyLen {
		return &FieldError{Field: "key", Reason: fmt.Sprintf("is %d bytes, over the %d-byte limit: use a shorter idempotency key (a hash of a long one)", len(r.Key), MaxInjectKeyLen)}
	}
	if !utf8.ValidString(r.Key) {
		return &FieldError{Field: "key", Reason: "is not valid UTF-8"}
	}
	return nil
}

// InjectOption sets an optional field of an inject (client.Inject).
type InjectOption func(*InjectRequest)

// InjectKey makes an inject idempotent under key (see [InjectRequest.Key]).
func InjectKey(key string) InjectOption {
	return func(r *InjectRequest) { r.Key = key }
}

// InjectReply answers an inject with the token that withdraws it.
type InjectReply struct {
	Token string `json:"token" msgpack:"token"`
}

// Validate requires a token.
func (r *InjectReply) Validate() error { return requireToken(r.Token) }

// UninjectRequest is the body of <p>.api.run.<run_id>.uninject.
type UninjectRequest struct {
	Token string `json:"token" msgpack:"token"`
}

// Validate requires a token.
func (r *UninjectRequest) Validate() error { return requireToken(r.Token) }

func requireToken(t string) error {
	if t == "" {
		return &FieldError{Field: "token", Reason: "is required"}
	}
	return nil
}

// UninjectReply answers an uninject.
type UninjectReply struct {
	Removed bool `json:"removed" msgpack:"removed"`
}

// Validate accepts any reply.
func (r *UninjectReply) Validate() error { return nil }

// SessionReply answers <p>.api.session.<session_id>.get.
type SessionReply struct {
	SessionID string         `json:"session_id" msgpack:"session_id"`
	Segments  []loop.Segment `json:"segments" msgpack:"segments"`
	// Runs are the segments' runs with their status, turns and usage, in
	// the segments' order.
	Runs []SessionRun `json:"runs,omitempty" msgpack:"runs,omitempty"`
	// LiveRunID is the session's live run (queued, running or parked),
	// and Queued the runs queued behind it (on_busy queue), in order.
	LiveRunID string   `json:"live_run_id,omitempty" msgpack:"live_run_id,omitempty"`
	Queued    []string `json:"queued,omitempty" msgpack:"queued,omitempty"`
}

// Validate checks the session id and every entry.
func (r *SessionReply) Validate() error {
	if err := ValidateID("session_id", r.SessionID); err != nil {
		return err
	}
	for i := range r.Segments {
		for j := range r.Segments[i].Entries {
			if err := r.Segments[i].Entries[j].Validate(); err != nil {
				return &FieldError{Field: fmt.Sprintf("segments[%d].entries[%d]", i, j), Reason: err.Error()}
			}
		}
	}
	return nil
}

// RewindRequest is the body of <p>.api.session.<session_id>.rewind.
type RewindRequest struct {
	KeepEntries int `json:"keep_entries" msgpack:"keep_entries"`
}

// Validate rejects a negative count.
func (r *RewindRequest) Validate() error {
	if r.KeepEntries < 0 {
		return &FieldError{Field: "keep_entries", Reason: "must not be negative"}
	}
	return nil
}

// RewindReply answers a rewind with the number of entries removed.
type RewindReply struct {
	Removed int `json:"removed" msgpack:"removed"`
}

// Validate rejects a negative count.
func (r *RewindReply) Validate() error {
	if r.Removed < 0 {
		return &FieldError{Field: "removed", Reason: "must not be negative"}
	}
	return nil
}

// AgentsReply answers <p>.api.agents.
type AgentsReply struct {
	Agents []AgentInfo `json:"agents" msgpack:"agents"`
}

// AgentInfo describes one agent.
type AgentInfo struct {
	Name     string   `json:"name" msgpack:"name"`
	Model    string   `json:"model" msgpack:"model"`
	Tools    []string `json:"tools" msgpack:"tools"`
	Handoffs []string `json:"handoffs" msgpack:"handoffs"`
	// Instructions are the agent's instructions as its agents file or
	// registry entry gives them (before plugins add theirs), capped at
	// MaxAgentInstructions bytes.
	Instructions string `json:"instructions,omitempty" msgpack:"instructions,omitempty"`
	// Schemas are the agent's resolved tools — built-in, MCP, tool
	// services — with their JSON Schemas, as a run would get them now:
	// always present, an empty list when none is resolved (no tools, or
	// tool services not up yet).
	Schemas []loop.ToolSchema `json:"schemas" msgpack:"schemas"`
	// Version is the announcing worker's version of the agent (in fleet
	// announcements; docs/protocol.md#agent-versions); omitted elsewhere.
	Version string `json:"version,omitempty" msgpack:"version,omitempty"`
}

// MaxAgentInstructions caps AgentInfo.Instructions: an agents list (and
// each worker's fleet announcement, refreshed every few seconds) stays
// small whatever the instructions' length.
const MaxAgentInstructions = 8 << 10

// Validate checks every agent name.
func (r *AgentsReply) Validate() error {
	for i, a := range r.Agents {
		if err := ValidateID(fmt.Sprintf("agents[%d].name", i), a.Name); err != nil {
			return err
		}
	}
	return nil
}

// Control is any request or reply body of this file.
type Control interface {
	Validate() error
}

// DecodeControl detects the body's encoding, decodes it into v and
// validates it; it returns the encoding, which the reply should use.
// Errors match ErrUnknownEncoding, ErrMalformed or ErrInvalidRequest.
func DecodeControl(h nats.Header, body []byte, v Control) (Encoding, error) {
	enc, err := Decode(h, body, v)
	if err != nil {
		return enc, &DecodeError{What: strings.TrimPrefix(fmt.Sprintf("%T", v), "*bus."), Encoding: enc, Err: err}
	}
	if err := v.Validate(); err != nil {
		return enc, err
	}
	return enc, nil
}

// DecodeRequest is DecodeControl for a request a client sent: a
// top-level field v does not have (its json names) is refused, naming
// the known ones, as a run request's is — a misspelt field is never
// silently ignored.
func DecodeRequest(h nats.Header, body []byte, v Control) (Encoding, error) {
	enc, err := EncodingOf(h, body)
	if err != nil {
		return enc, &DecodeError{What: strings.TrimPrefix(fmt.Sprintf("%T", v), "*bus."), Encoding: enc, Err: err}
	}
	keys, _ := topLevel(enc, body)
	known := jsonFields(v)
	for _, k := range keys {
		if !slices.Contains(known, k) {
			return enc, &FieldError{Field: k, Reason: "unknown field; known fields: " + strings.Join(known, ", ")}
		}
	}
	return DecodeControl(h, body, v)
}

// jsonFields lists the json names of the fields of the struct v points
// to, sorted.
func jsonFields(v any) []string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	if t.Kind() != reflect.Struct {
		return out
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// WorkersReply answers <p>.api.workers: the live workers of the fleet.
type WorkersReply struct {
	Workers []WorkerInfo `json:"workers" msgpack:"workers"`
}

// WorkerInfo describes one live worker.
type WorkerInfo struct {
	ID          string    `json:"id" msgpack:"id"`
	Agents      []string  `json:"agents" msgpack:"agents"`
	Concurrency int       `json:"concurrency" msgpack:"concurrency"`
	InFlight    int       `json:"in_flight" msgpack:"in_flight"`
	Version     string    `json:"version,omitempty" msgpack:"version,omitempty"`
	StartedAt   time.Time `json:"started_at" msgpack:"started_at"`
	SeenAt      time.Time `json:"seen_at" msgpack:"seen_at"`
	// AgentVersions is the worker's version of each agent it serves
	// (docs/protocol.md#agent-versions), by agent name; omitted by workers
	// that announce none.
	AgentVersions map[string]string `json:"agent_versions,omitempty" msgpack:"agent_versions,omitempty"`
}

// Validate checks every worker id.
func (r *WorkersReply) Validate() error {
	for i, w := range r.Workers {
		if err := ValidateID(fmt.Sprintf("workers[%d].id", i), w.ID); err != nil {
			return err
		}
	}
	return nil
}

// HandoffRequest is the body of <p>.api.session.<session_id>.handoff: the
// session's run that has ended.
type HandoffRequest struct {
	RunID string `json:"run_id" msgpack:"run_id"`
	// Status and Agent are the ended run's outcome (completed or failed)
	// and agent, as the worker that ended it knows them; without them the
	// API reads the run's record.
	Status RunState `json:"status,omitempty" msgpack:"status,omitempty"`
	Agent  string   `json:"agent,omitempty" msgpack:"agent,omitempty"`
}

// Validate checks the run id and the outcome.
func (r *HandoffRequest) Validate() error {
	if err := ValidateID("run_id", r.RunID); err != nil {
		return err
	}
	switch r.Status {
	case "", StateCompleted, StateFailed:
	default:
		return &FieldError{Field: "status", Reason: quote(string(r.Status)) + " is not completed or failed: a handoff follows a run's end"}
	}
	if r.Agent != "" {
		return ValidateID("agent", r.Agent)
	}
	return nil
}

// HandoffReply answers a handoff: the session's next run, if one started
// (a queued request, or the messages the ended run left in its mailbox),
// else empty (the session has no live run, or another run holds it).
type HandoffReply struct {
	NextRunID string `json:"next_run_id,omitempty" msgpack:"next_run_id,omitempty"`
}

// Validate accepts any reply.
func (r *HandoffReply) Validate() error { return nil }
