package toolsvc

import "errors"

// Sentinel errors; match them with errors.Is.
var (
	// ErrNoService is a call no instance of the tool's service answered
	// (NATS no responders).
	ErrNoService = errors.New("no tool service instance answered")
	// ErrTimeout is a call whose service did not answer in time.
	ErrTimeout = errors.New("tool service did not answer in time")
	// ErrDedupe is a call the service could not record in its dedupe
	// store; it was not run, so calling again is safe.
	ErrDedupe = errors.New("tool service dedupe store unavailable")
	// ErrCallConflict is a call whose run and call id an earlier call
	// with other arguments used: a deduplicating service does not run it.
	ErrCallConflict = errors.New("tool call id reused with other arguments")
)

// Error codes of error replies (the micro protocol's
// Nats-Service-Error-Code header).
const (
	// CodeInvalidArguments: the arguments do not match the tool's
	// schema; the call is not retried.
	CodeInvalidArguments = "400"
	// CodeToolError: the tool failed; the model sees the description.
	CodeToolError = "500"
	// CodeUnavailable: the service could not run the call now (its dedupe
	// store failed, or the instance stopped during the call and cancelled
	// it); the call made again runs.
	CodeUnavailable = "503"
	// CodeConflict: a deduplicating service had a call with the same run
	// and call id but other arguments; this call did not run.
	CodeConflict = "409"
)
