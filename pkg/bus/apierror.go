package bus

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
)

// Error types of error replies that are not the loop's error names.
const (
	TypeInvalidRequest = "InvalidRequest"
	TypeUnknownAgent   = "UnknownAgent"
	TypeNotFound       = "NotFound"
	TypeInternal       = "InternalError"
	// TypeSessionBusy refuses a new run for a session that has a live run
	// (on_busy refuse; the message names the live run) or the delete of
	// such a session.
	TypeSessionBusy = "SessionBusy"
)

// APIError is the body of an error reply, {"error": {type, message, hint}},
// and the error a client gets back. It matches ErrInvalidRequest when its
// type is InvalidRequest.
type APIError struct {
	Type    string `json:"type" msgpack:"type"`
	Message string `json:"message" msgpack:"message"`
	Hint    string `json:"hint,omitempty" msgpack:"hint,omitempty"`
}

func (e *APIError) Error() string {
	if e.Hint == "" {
		return e.Type + ": " + e.Message
	}
	return e.Type + ": " + e.Message + "\n  hint: " + e.Hint
}

// Is matches ErrInvalidRequest for InvalidRequest errors.
func (e *APIError) Is(target error) bool {
	return target == ErrInvalidRequest && e.Type == TypeInvalidRequest
}

// Code is the Nats-Service-Error-Code for the error's type: 400 for an
// invalid request, 404 for an unknown agent or a missing run or session,
// 500 otherwise.
func (e *APIError) Code() int {
	switch e.Type {
	case TypeInvalidRequest:
		return 400
	case TypeUnknownAgent, TypeNotFound:
		return 404
	case TypeSessionBusy:
		return 409
	}
	return 500
}

// ErrorReply is the envelope of an error body.
type ErrorReply struct {
	Error APIError `json:"error" msgpack:"error"`
}

// Validate requires a type.
func (r *ErrorReply) Validate() error {
	if r.Error.Type == "" {
		return &FieldError{Field: "error.type", Reason: "is required"}
	}
	return nil
}

// ErrorFor converts err to the error body of a reply: a *FieldError or
// anything matching ErrInvalidRequest becomes InvalidRequest, an
// *APIError is kept, anything else is an internal error. Every body it
// returns has a hint (the next thing to try): an *APIError without one
// gets its type's (see DefaultHint).
func ErrorFor(err error) *APIError {
	var ae *APIError
	if errors.As(err, &ae) {
		if ae.Hint != "" {
			return ae
		}
		withHint := *ae
		withHint.Hint = DefaultHint(ae.Type, err)
		return &withHint
	}
	if errors.Is(err, ErrInvalidRequest) || errors.Is(err, ErrMalformed) || errors.Is(err, ErrUnknownEncoding) {
		return &APIError{Type: TypeInvalidRequest, Message: err.Error(), Hint: DefaultHint(TypeInvalidRequest, err)}
	}
	return &APIError{Type: TypeInternal, Message: err.Error(), Hint: DefaultHint(TypeInternal, err)}
}

// DefaultHint is the hint of an error reply of type typ that has none of
// its own; err refines it (an undecodable body, a broker outage).
func DefaultHint(typ string, err error) string {
	switch typ {
	case TypeInvalidRequest:
		switch {
		case errors.Is(err, ErrUnknownEncoding):
			return "send JSON or msgpack with a matching Content-Type (application/json or application/msgpack)"
		case errors.Is(err, ErrMalformed):
			return "send a JSON or msgpack object with the fields of the request (docs/protocol.md)"
		}
		return "fix the field the message names (docs/protocol.md lists every field and its type), then send the request again"
	case TypeUnknownAgent:
		return "use one of the agents the fleet serves (GET /v1/agents on a gateway lists them), or start a worker that serves this one"
	case TypeNotFound:
		return "check the id: use the run or session id that submit returned"
	}
	if IsTransient(err) {
		return "the broker is unavailable for now (a leader election, a restart, a cluster still forming): try again in a few seconds"
	}
	return "try again; if it keeps failing, look for this error in the logs of the workers and the NATS servers"
}

// ErrorHeaders returns the micro error headers for e.
func ErrorHeaders(e *APIError, enc Encoding) nats.Header {
	return nats.Header{
		HeaderServiceError:     []string{e.Message},
		HeaderServiceErrorCode: []string{strconv.Itoa(e.Code())},
		HeaderContentType:      []string{enc.ContentType()},
	}
}

// DecodeReply decodes a reply into v. An error reply (one with the micro
// error headers) is returned as an *APIError, from its {"error": …} body
// when it has one; a reply that does not decode matches ErrMalformed. A
// status reply's own "error" field is not an error reply.
func DecodeReply(h nats.Header, body []byte, v Control) error {
	if code := headerValue(h, HeaderServiceErrorCode); code != "" || headerValue(h, HeaderServiceError) != "" {
		var er ErrorReply
		if _, err := Decode(h, body, &er); err == nil && er.Error.Type != "" {
			return &er.Error
		}
		return &APIError{Type: TypeInternal, Message: headerValue(h, HeaderServiceError) + " (code " + code + ")"}
	}
	_, err := DecodeControl(h, body, v)
	return err
}

// UnknownAgentError is the UnknownAgent reply for agent, which no worker
// of the fleet serves or served: its hint names the agents known (sorted,
// without repeats), or says no worker serves any yet. A submit and a
// schedule add refuse with it alike. In a fleet whose workers serve the
// agents registry (registry), the way to define it is lovia agents apply.
func UnknownAgentError(agent string, known []string, registry bool) *APIError {
	known = slices.Compact(slices.Sorted(slices.Values(known)))
	var hint string
	switch {
	case registry && len(known) > 0:
		hint = "use one of the agents the fleet serves: " + strings.Join(known, ", ") + "; or define " + agent + " in the agents registry: lovia agents apply FILE (the registry's workers serve it within a second)"
	case registry:
		hint = "define it in the agents registry: lovia agents apply FILE (the registry's workers serve it within a second)"
	case len(known) > 0:
		hint = "use one of the agents the fleet serves: " + strings.Join(known, ", ") + "; or start a worker whose agents file defines " + agent
	default:
		hint = "no worker of the fleet serves any agent yet: start a worker (lovia worker --agents FILE) whose agents file defines it"
	}
	return &APIError{Type: TypeUnknownAgent, Message: "unknown agent " + strconv.Quote(agent), Hint: hint}
}
