package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/nats-io/nats.go"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// Sentinels.
var (
	// ErrInvalidConfig is a Config field out of range; the message names
	// the field.
	ErrInvalidConfig = errors.New("gateway: invalid config")
	// ErrStarted is a second Start.
	ErrStarted = errors.New("gateway: already started")
	// ErrStopped is a Start after Stop: a gateway serves once.
	ErrStopped = errors.New("gateway: stopped")
)

// Error types of the replies only the HTTP gateway gives. Replies of the
// control operations carry the types of bus.APIError (InvalidRequest,
// NotFound, UnknownAgent, InternalError).
const (
	// TypeUnauthorized is a missing or wrong bearer token (401).
	TypeUnauthorized = "Unauthorized"
	// TypeMethodNotAllowed is a route called with the wrong method (405).
	TypeMethodNotAllowed = "MethodNotAllowed"
	// TypeUnavailable is NATS, or every process serving an operation,
	// being out of reach (503).
	TypeUnavailable = "Unavailable"
	// TypeTimeout is an operation that did not finish in time (504).
	TypeTimeout = "Timeout"
)

func configError(field, format string, args ...any) error {
	return fmt.Errorf("%w: Config.%s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}

// httpError is an error reply: the {"error": …} body and its status.
type httpError struct {
	status int
	body   bus.APIError
	cause  error // the error it was converted from, if any
}

func (e *httpError) Error() string { return e.body.Error() }

func (e *httpError) Unwrap() error { return e.cause }

func newError(status int, typ, msg, hint string) *httpError {
	return &httpError{status: status, body: bus.APIError{Type: typ, Message: msg, Hint: hint}}
}

func invalidRequest(status int, msg, hint string) *httpError {
	return newError(status, bus.TypeInvalidRequest, msg, hint)
}

// errorOf converts an error of the API, the client or a tail to a reply:
// the status is the APIError's code, except that internal errors caused by
// NATS being out of reach are 503 and timeouts 504.
func errorOf(err error) *httpError {
	if he, ok := errors.AsType[*httpError](err); ok {
		return he
	}
	he := &httpError{cause: err}
	ae := bus.ErrorFor(err)
	switch {
	case ae.Type != bus.TypeInternal:
		he.status, he.body = ae.Code(), *ae
	case errors.Is(err, nats.ErrNoResponders):
		he.status, he.body = http.StatusServiceUnavailable, bus.APIError{Type: TypeUnavailable, Message: err.Error(),
			Hint: "no process is serving this operation; start a worker or a gateway on the same NATS"}
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrDisconnected):
		he.status, he.body = http.StatusServiceUnavailable, bus.APIError{Type: TypeUnavailable, Message: err.Error(), Hint: "the gateway lost NATS; retry shortly"}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		he.status, he.body = http.StatusGatewayTimeout, bus.APIError{Type: TypeTimeout, Message: err.Error(), Hint: "NATS or the stores answered too slowly; retry"}
	default:
		he.status, he.body = ae.Code(), *ae
	}
	return he
}

// lostNATS reports whether an error reply may be what a fleet out of
// reach looks like: an unknown agent, a run or session not found, an
// internal error. Replies about the request itself (invalid input, a
// conflict) are not.
func lostNATS(he *httpError) bool {
	switch he.body.Type {
	case bus.TypeUnknownAgent, bus.TypeNotFound, bus.TypeInternal:
		return true
	}
	return false
}
