package loop

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// Kind sentinels: every typed error of the loop matches exactly one of these
// with errors.Is, so callers can test the kind without a type assertion.
var (
	ErrUser              = errors.New("user error")
	ErrProvider          = errors.New("provider error")
	ErrContextOverflow   = errors.New("context overflow")
	ErrTool              = errors.New("tool error")
	ErrInvalidToolArgs   = errors.New("invalid tool arguments")
	ErrMaxTurns          = errors.New("max turns exceeded")
	ErrBudget            = errors.New("budget exceeded")
	ErrCancelled         = errors.New("run cancelled")
	ErrGuardrail         = errors.New("guardrail tripped")
	ErrOutputValidation  = errors.New("output validation failed")
	ErrAbandoned         = errors.New("run abandoned: the stream consumer stopped before the terminal event")
	ErrNoSnapshot        = errors.New("no snapshot")
	ErrFenced            = errors.New("checkpoint fenced: another writer owns this run")
	ErrMailboxTokenEmpty = errors.New("mailbox token is empty")
	// ErrUnavailable: a store the run depends on (its Checkpointer,
	// Mailbox or Session) is unavailable for now — a broker outage, a
	// leader election, a cluster not formed yet — and its own retries ran
	// out. The run is interrupted, not failed: it stops without a terminal
	// event and without a terminal checkpoint, so that its last checkpoint
	// stays resumable, and RunHandle.Result returns the store's error,
	// which matches ErrUnavailable. Stores mark their transient errors with
	// it (errors.Is); the loop never decides it from a call site.
	ErrUnavailable = errors.New("a store the run depends on is unavailable for now: the run is interrupted, not failed")
)

// ErrorInfo is the JSON-safe description of an error, as carried by
// run_failed and tool_call_failed events and checkpoint heads.
type ErrorInfo struct {
	Type      string `json:"type" msgpack:"type"`
	Message   string `json:"message" msgpack:"message"`
	Hint      string `json:"hint,omitempty" msgpack:"hint,omitempty"`
	Retryable bool   `json:"retryable" msgpack:"retryable"`
}

func render(msg, hint string) string {
	if hint == "" {
		return msg
	}
	return msg + "\n  hint: " + hint
}

// UserError is a caller misconfiguration: fix the agent, the options or the
// request and run again.
type UserError struct {
	Message string
	Hint    string
	Cause   error
}

func (e *UserError) Error() string        { return render(e.Message, e.Hint) }
func (e *UserError) Unwrap() error        { return e.Cause }
func (e *UserError) Is(target error) bool { return target == ErrUser }

// Retryability is a provider error's retry classification.
type Retryability int8

// Retryability values. Unknown counts as retryable.
const (
	RetryUnknown Retryability = iota
	Retryable
	NotRetryable
)

// ProviderError is a failed model call.
type ProviderError struct {
	Message    string
	Hint       string
	Vendor     string
	Model      string
	StatusCode int
	Retryable  Retryability
	// RetryAfter is the wait the endpoint asked for (Retry-After), if any.
	RetryAfter time.Duration
	Body       string
	Cause      error
}

func (e *ProviderError) Error() string        { return render(e.Message, e.Hint) }
func (e *ProviderError) Unwrap() error        { return e.Cause }
func (e *ProviderError) Is(target error) bool { return target == ErrProvider }

// IsRetryable reports whether the loop's retry policy may retry the error
// (true and unknown both count).
func (e *ProviderError) IsRetryable() bool { return e.Retryable != NotRetryable }

// ContextOverflowError is a prompt the endpoint rejected as too long. It is
// not a ProviderError and is never retried as such; the context policy may
// compact the view and try once more.
type ContextOverflowError struct {
	Message string
	Hint    string
	// ReportedWindow is the context window the endpoint named, or 0.
	ReportedWindow int
	Cause          error
}

func (e *ContextOverflowError) Error() string        { return render(e.Message, e.Hint) }
func (e *ContextOverflowError) Unwrap() error        { return e.Cause }
func (e *ContextOverflowError) Is(target error) bool { return target == ErrContextOverflow }

// ToolError is returned by a tool to shape the error result the model sees.
// Any other error from a tool becomes "Tool error: <message>" too.
type ToolError struct {
	Tool    string
	Message string
	Hint    string
	Cause   error
}

func (e *ToolError) Error() string        { return render(e.Message, e.Hint) }
func (e *ToolError) Unwrap() error        { return e.Cause }
func (e *ToolError) Is(target error) bool { return target == ErrTool }

// InvalidToolArguments is a schema validation failure at a tool's function
// boundary. It is never retried.
type InvalidToolArguments struct {
	Tool    string
	Message string
}

func (e *InvalidToolArguments) Error() string { return e.Message }
func (e *InvalidToolArguments) Is(target error) bool {
	return target == ErrInvalidToolArgs || target == ErrTool
}

// MaxTurnsExceeded ends a run that reached max_turns without an output.
type MaxTurnsExceeded struct {
	MaxTurns int
}

func (e *MaxTurnsExceeded) Error() string {
	return render(fmt.Sprintf("Run exceeded max_turns=%d without producing output", e.MaxTurns),
		"raise max_turns, or resume the run with a higher limit")
}
func (e *MaxTurnsExceeded) Is(target error) bool { return target == ErrMaxTurns }

// BudgetExceeded ends a run that crossed one of its budget caps.
type BudgetExceeded struct {
	Message string
}

func (e *BudgetExceeded) Error() string {
	return render(e.Message, "raise the budget, or resume the run with a larger one")
}
func (e *BudgetExceeded) Is(target error) bool { return target == ErrBudget }

// CancelledHint is the hint of a RunCancelled error: what to do to run
// a cancelled run after all.
const CancelledHint = "the run was cancelled on request; to continue it, submit it again with the same run_id (if_run_exists resume)"

// RunCancelled ends a cancelled run. Reason is the cancel reason.
type RunCancelled struct {
	Reason string
}

func (e *RunCancelled) Error() string {
	if e.Reason == "" {
		return "run cancelled"
	}
	return e.Reason
}
func (e *RunCancelled) Is(target error) bool { return target == ErrCancelled }

// GuardrailTripped ends a run whose input or output a guardrail rejected.
type GuardrailTripped struct {
	Stage   string // "input" or "output"
	Message string
}

// Error is "<stage> guardrail: <message>", or "<stage> guardrail rejected
// the value" when the guardrail tripped without a message (an error with
// empty text; lovia's guardrail returning true).
func (e *GuardrailTripped) Error() string {
	if e.Message == "" {
		return e.Stage + " guardrail rejected the value"
	}
	return e.Stage + " guardrail: " + e.Message
}
func (e *GuardrailTripped) Is(target error) bool { return target == ErrGuardrail }

// OutputValidationError is a final answer that does not parse or validate
// against the output schema.
type OutputValidationError struct {
	Message    string
	Raw        string // at most 200 characters of the offending output
	OutputType string
	Cause      error
}

func (e *OutputValidationError) Error() string {
	return render(e.Message, "enable output repair (the default) or pass a repair strategy; make the instructions ask for the schema")
}
func (e *OutputValidationError) Unwrap() error        { return e.Cause }
func (e *OutputValidationError) Is(target error) bool { return target == ErrOutputValidation }

// Describe returns the JSON-safe description of err, with the loop's error
// type names (docs/protocol.md#error-types) and hints.
func Describe(err error) ErrorInfo {
	if err == nil {
		return ErrorInfo{}
	}
	info := ErrorInfo{Message: err.Error()}
	var (
		ue  *UserError
		pe  *ProviderError
		co  *ContextOverflowError
		ia  *InvalidToolArguments
		te  *ToolError
		mt  *MaxTurnsExceeded
		be  *BudgetExceeded
		rc  *RunCancelled
		gt  *GuardrailTripped
		ov  *OutputValidationError
		ne  net.Error
		typ string
	)
	switch {
	case errors.As(err, &rc):
		// Not retryable: submitting it again would not undo the cancel's
		// intent (a resubmission resumes it, on purpose).
		typ, info.Message, info.Hint = "RunCancelled", rc.Error(), CancelledHint
	case errors.As(err, &mt):
		typ, info.Message, info.Hint, info.Retryable = "MaxTurnsExceeded", "Run exceeded max_turns="+fmt.Sprint(mt.MaxTurns)+" without producing output", "raise max_turns, or resume the run with a higher limit", true
	case errors.As(err, &be):
		typ, info.Message, info.Hint, info.Retryable = "BudgetExceeded", be.Message, "raise the budget, or resume the run with a larger one", true
	case errors.As(err, &co):
		typ, info.Message, info.Hint = "ContextOverflowError", co.Message, co.Hint
	case errors.As(err, &pe):
		typ, info.Message, info.Hint, info.Retryable = "ProviderError", pe.Message, pe.Hint, pe.IsRetryable()
	case errors.As(err, &gt):
		typ, info.Message = "GuardrailTripped", gt.Error()
	case errors.As(err, &ov):
		typ, info.Message, info.Hint = "OutputValidationError", ov.Message, "enable output repair (the default) or pass a repair strategy"
	case errors.As(err, &ue):
		typ, info.Message, info.Hint = "UserError", ue.Message, ue.Hint
	case errors.As(err, &ia):
		typ, info.Message = "InvalidToolArguments", ia.Message
	case errors.As(err, &te):
		typ, info.Message, info.Hint = "ToolError", te.Message, te.Hint
	case errors.Is(err, context.DeadlineExceeded):
		typ, info.Retryable = "TimeoutError", true
	case errors.Is(err, context.Canceled):
		typ, info.Retryable = "Cancelled", true
	case errors.As(err, &ne):
		typ, info.Retryable = "ConnectionError", true
		info.Hint = "check the network, the endpoint address and the retry policy"
	default:
		typ = "Error"
	}
	info.Type = typ
	return info
}

// interruptedStatus reports whether a run that failed with err is
// "interrupted" (resumable after a transient cause) rather than "failed".
func interruptedStatus(err error) bool {
	var pe *ProviderError
	switch {
	case errors.Is(err, ErrCancelled), errors.Is(err, ErrMaxTurns), errors.Is(err, ErrBudget), errors.Is(err, ErrUnavailable),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return true
	case errors.Is(err, ErrContextOverflow):
		return false
	case errors.As(err, &pe):
		return pe.IsRetryable()
	}
	var ne net.Error
	return errors.As(err, &ne)
}
