package loop

import "sync"

// EventType is an event's stable kind string (docs/protocol.md#event-types).
type EventType string

// Event types.
const (
	EventRunStarted          EventType = "run_started"
	EventTurnStarted         EventType = "turn_started"
	EventTurnEnded           EventType = "turn_ended"
	EventTextDelta           EventType = "text_delta"
	EventReasoningDelta      EventType = "reasoning_delta"
	EventOutputDiscarded     EventType = "output_discarded"
	EventMessageCompleted    EventType = "message_completed"
	EventUserMessageInjected EventType = "user_message_injected"
	EventToolCallStarted     EventType = "tool_call_started"
	EventToolCallCompleted   EventType = "tool_call_completed"
	EventToolCallFailed      EventType = "tool_call_failed"
	EventApprovalRequired    EventType = "approval_required"
	EventApprovalResolved    EventType = "approval_resolved"
	EventHandoffOccurred     EventType = "handoff_occurred"
	EventContextCompacted    EventType = "context_compacted"
	EventRunCompleted        EventType = "run_completed"
	EventRunFailed           EventType = "run_failed"
)

// Event is one item of a run's stream. Concrete events are pointers to the
// structs below; their JSON/msgpack encoding is the event's `data` on the
// wire. Header carries the active agent and the turn at emission time.
type Event interface {
	Type() EventType
	Header() *EventHeader
}

// EventHeader is the part of every event that the wire envelope carries
// outside `data`.
type EventHeader struct {
	Agent string `json:"-" msgpack:"-"`
	Turn  int    `json:"-" msgpack:"-"`
}

// Header returns h; it makes every event struct an Event.
func (h *EventHeader) Header() *EventHeader { return h }

// IsTerminal reports whether ev ends a stream.
func IsTerminal(ev Event) bool {
	t := ev.Type()
	return t == EventRunCompleted || t == EventRunFailed
}

// ToolCall identifies a call in tool events.
type ToolCall struct {
	ID        string `json:"id" msgpack:"id"`
	Name      string `json:"name" msgpack:"name"`
	Arguments string `json:"arguments" msgpack:"arguments"`
}

// RunStarted is the first event of a stream.
type RunStarted struct {
	EventHeader
	// Input is the run's input entries (empty on resume and replay).
	Input []Entry `json:"input" msgpack:"input"`
	// FromCheckpoint is true when the run resumes or replays a stored run.
	FromCheckpoint bool `json:"from_checkpoint" msgpack:"from_checkpoint"`
}

// TurnStarted opens a turn.
type TurnStarted struct {
	EventHeader
	TurnNo int `json:"turn" msgpack:"turn"`
}

// TurnEnded closes a turn (not emitted when the turn aborts).
type TurnEnded struct {
	EventHeader
	TurnNo int `json:"turn" msgpack:"turn"`
}

// TextDelta is a provisional fragment of assistant text.
type TextDelta struct {
	EventHeader
	Delta string `json:"delta" msgpack:"delta"`
}

// ReasoningDelta is a provisional fragment of reasoning (display only).
type ReasoningDelta struct {
	EventHeader
	Delta string `json:"delta" msgpack:"delta"`
}

// OutputDiscarded voids every delta of the current turn emitted so far.
type OutputDiscarded struct {
	EventHeader
}

// MessageCompleted carries one assembled assistant turn, with tool-call
// arguments exactly as the model emitted them.
type MessageCompleted struct {
	EventHeader
	Entries []Entry `json:"entries" msgpack:"entries"`
}

// UserMessageInjected reports a drained steering message.
type UserMessageInjected struct {
	EventHeader
	Content string `json:"content" msgpack:"content"`
	Parts   []Part `json:"parts,omitempty" msgpack:"parts,omitempty"`
	TurnNo  int    `json:"turn" msgpack:"turn"`
}

// ToolCallStarted precedes a call that passed preflight.
type ToolCallStarted struct {
	EventHeader
	Call ToolCall `json:"call" msgpack:"call"`
}

// ToolCallCompleted reports a call's outcome (also for calls rejected before
// they ran, which have no ToolCallStarted).
type ToolCallCompleted struct {
	EventHeader
	Call ToolCall `json:"call" msgpack:"call"`
	// Result is the tool's return value, the error text, or nil for a handoff.
	Result any `json:"result" msgpack:"result"`
	// Output is the stored text the model sees.
	Output  string `json:"output" msgpack:"output"`
	IsError bool   `json:"is_error" msgpack:"is_error"`
}

// ToolCallFailed is a non-terminal error scoped to one call; the call's
// ToolCallCompleted(is_error) follows.
type ToolCallFailed struct {
	EventHeader
	Call  ToolCall  `json:"call" msgpack:"call"`
	Error ErrorInfo `json:"error" msgpack:"error"`
	Err   error     `json:"-" msgpack:"-"`
}

// Decision is an approval decision.
type Decision string

// Decisions.
const (
	Approve Decision = "approve"
	Reject  Decision = "reject"
)

// ApprovalRequired asks for a decision on a gated call. The consumer (or a
// hook) may call Approve or Reject while it holds the event; otherwise the
// out-of-band channel, then the agent's approval handler decide, and a call
// nobody decided is rejected (fail closed).
type ApprovalRequired struct {
	EventHeader
	Call     ToolCall `json:"call" msgpack:"call"`
	decision *pendingDecision
}

// Approve allows the call.
func (e *ApprovalRequired) Approve(reason string) { e.decision.set(Approve, reason) }

// Reject denies the call.
func (e *ApprovalRequired) Reject(reason string) { e.decision.set(Reject, reason) }

type pendingDecision struct {
	mu       sync.Mutex
	decision Decision
	reason   string
}

func (p *pendingDecision) set(d Decision, reason string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.decision == "" {
		p.decision, p.reason = d, reason
	}
}

func (p *pendingDecision) get() (Decision, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.decision, p.reason
}

// ApprovalResolved reports the decision that was applied to a gated call,
// including the default denial.
type ApprovalResolved struct {
	EventHeader
	CallID   string   `json:"call_id" msgpack:"call_id"`
	Decision Decision `json:"decision" msgpack:"decision"`
	Reason   string   `json:"reason" msgpack:"reason"`
}

// HandoffOccurred reports a transfer of control.
type HandoffOccurred struct {
	EventHeader
	FromAgent string `json:"from_agent" msgpack:"from_agent"`
	ToAgent   string `json:"to_agent" msgpack:"to_agent"`
}

// CompactionNotice describes one compaction of the view.
type CompactionNotice struct {
	Reason       string   `json:"reason" msgpack:"reason"`
	Reactive     bool     `json:"reactive" msgpack:"reactive"`
	Summary      *string  `json:"summary" msgpack:"summary"`
	TokensBefore int      `json:"tokens_before" msgpack:"tokens_before"`
	TokensAfter  int      `json:"tokens_after" msgpack:"tokens_after"`
	Detail       []string `json:"detail" msgpack:"detail"`
}

// ContextCompacted reports that the context policy made new decisions.
type ContextCompacted struct {
	EventHeader
	Notice        CompactionNotice `json:"notice" msgpack:"notice"`
	EntriesBefore int              `json:"entries_before" msgpack:"entries_before"`
	EntriesAfter  int              `json:"entries_after" msgpack:"entries_after"`
}

// RunCompleted is the terminal success event.
type RunCompleted struct {
	EventHeader
	Output       any     `json:"output" msgpack:"output"`
	Usage        Usage   `json:"usage" msgpack:"usage"`
	Turns        int     `json:"turns" msgpack:"turns"`
	FinishReason *string `json:"finish_reason" msgpack:"finish_reason"`
	FinalAgent   string  `json:"final_agent" msgpack:"final_agent"`
	// Result is the full result (not serialized).
	Result *RunResult `json:"-" msgpack:"-"`
}

// RunFailed is the terminal failure event.
type RunFailed struct {
	EventHeader
	Error ErrorInfo `json:"error" msgpack:"error"`
	Err   error     `json:"-" msgpack:"-"`
}

func (*RunStarted) Type() EventType          { return EventRunStarted }
func (*TurnStarted) Type() EventType         { return EventTurnStarted }
func (*TurnEnded) Type() EventType           { return EventTurnEnded }
func (*TextDelta) Type() EventType           { return EventTextDelta }
func (*ReasoningDelta) Type() EventType      { return EventReasoningDelta }
func (*OutputDiscarded) Type() EventType     { return EventOutputDiscarded }
func (*MessageCompleted) Type() EventType    { return EventMessageCompleted }
func (*UserMessageInjected) Type() EventType { return EventUserMessageInjected }
func (*ToolCallStarted) Type() EventType     { return EventToolCallStarted }
func (*ToolCallCompleted) Type() EventType   { return EventToolCallCompleted }
func (*ToolCallFailed) Type() EventType      { return EventToolCallFailed }
func (*ApprovalRequired) Type() EventType    { return EventApprovalRequired }
func (*ApprovalResolved) Type() EventType    { return EventApprovalResolved }
func (*HandoffOccurred) Type() EventType     { return EventHandoffOccurred }
func (*ContextCompacted) Type() EventType    { return EventContextCompacted }
func (*RunCompleted) Type() EventType        { return EventRunCompleted }
func (*RunFailed) Type() EventType           { return EventRunFailed }
