package bus

import (
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// EventRunResumed is the type of RunResumed.
const EventRunResumed loop.EventType = "run_resumed"

// RunStarted is run_started as the fleet publishes it: the loop's event
// plus the worker that claimed the run ({worker, input, from_checkpoint}).
// A worker wraps the loop's *loop.RunStarted in it before publishing;
// Envelope.Event returns one for every run_started.
type RunStarted struct {
	loop.RunStarted
	Worker string `json:"worker" msgpack:"worker"`
	// ParentRunID is the run that started this one (a subagent's
	// parent), from its request's metadata (docs/protocol.md#run-trees).
	ParentRunID string `json:"parent_run_id,omitempty" msgpack:"parent_run_id,omitempty"`
	// Version is the worker's version of the agent the run starts on (its
	// definition's digest, "+" its build id when it has one;
	// docs/protocol.md#agent-versions); omitted by workers that give none.
	Version string `json:"version,omitempty" msgpack:"version,omitempty"`
}

// RunResumed is published by a worker for each later claim within one
// submission, after a crash or a lost claim. The loop never emits it.
type RunResumed struct {
	loop.EventHeader
	Worker   string `json:"worker" msgpack:"worker"`
	Attempt  int    `json:"attempt" msgpack:"attempt"`
	FromTurn int    `json:"from_turn" msgpack:"from_turn"`
	// Version is the resuming worker's version of the agent;
	// StartedVersion the version the run started on, and PreviousVersion
	// that of the claim before this one. They differ when the resume
	// crossed versions (a rolling deploy); each is omitted when unknown.
	Version         string `json:"version,omitempty" msgpack:"version,omitempty"`
	StartedVersion  string `json:"started_version,omitempty" msgpack:"started_version,omitempty"`
	PreviousVersion string `json:"previous_version,omitempty" msgpack:"previous_version,omitempty"`
}

// VersionChanged reports whether the resume runs on another version than
// the run started on (false when either is unknown).
func (e *RunResumed) VersionChanged() bool {
	return e.Version != "" && e.StartedVersion != "" && e.Version != e.StartedVersion
}

// Type returns EventRunResumed.
func (*RunResumed) Type() loop.EventType { return EventRunResumed }

// IsTerminalType reports whether events of type t end a submission
// (run_completed, run_failed).
func IsTerminalType(t loop.EventType) bool {
	return t == loop.EventRunCompleted || t == loop.EventRunFailed
}

// newEvent returns an empty event of type t, or nil for an unknown type.
func newEvent(t loop.EventType) loop.Event {
	switch t {
	case loop.EventRunStarted:
		return &RunStarted{}
	case EventRunResumed:
		return &RunResumed{}
	case loop.EventTurnStarted:
		return &loop.TurnStarted{}
	case loop.EventTurnEnded:
		return &loop.TurnEnded{}
	case loop.EventTextDelta:
		return &loop.TextDelta{}
	case loop.EventReasoningDelta:
		return &loop.ReasoningDelta{}
	case loop.EventOutputDiscarded:
		return &loop.OutputDiscarded{}
	case loop.EventMessageCompleted:
		return &loop.MessageCompleted{}
	case loop.EventUserMessageInjected:
		return &loop.UserMessageInjected{}
	case loop.EventToolCallStarted:
		return &loop.ToolCallStarted{}
	case loop.EventToolCallCompleted:
		return &loop.ToolCallCompleted{}
	case loop.EventToolCallFailed:
		return &loop.ToolCallFailed{}
	case loop.EventApprovalRequired:
		return &loop.ApprovalRequired{}
	case loop.EventApprovalResolved:
		return &loop.ApprovalResolved{}
	case loop.EventHandoffOccurred:
		return &loop.HandoffOccurred{}
	case loop.EventContextCompacted:
		return &loop.ContextCompacted{}
	case loop.EventRunCompleted:
		return &loop.RunCompleted{}
	case loop.EventRunFailed:
		return &loop.RunFailed{}
	}
	return nil
}

// EventTypes lists every event type of the wire contract
// (docs/protocol.md#event-types).
func EventTypes() []loop.EventType {
	return []loop.EventType{
		loop.EventRunStarted, EventRunResumed, loop.EventTurnStarted, loop.EventTurnEnded,
		loop.EventTextDelta, loop.EventReasoningDelta, loop.EventOutputDiscarded,
		loop.EventMessageCompleted, loop.EventUserMessageInjected, loop.EventToolCallStarted,
		loop.EventToolCallCompleted, loop.EventToolCallFailed, loop.EventApprovalRequired,
		loop.EventApprovalResolved, loop.EventHandoffOccurred, loop.EventContextCompacted,
		loop.EventRunCompleted, loop.EventRunFailed,
	}
}
