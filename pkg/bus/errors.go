package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Sentinels. Every error this package returns matches at most one of these
// with errors.Is (a field error matches both ErrInvalidToken and
// ErrInvalidRequest, a publish error of an outage both ErrPublish and
// ErrUnavailable); backend errors stay reachable through the chain, so
// callers can also match jetstream's and nats' own sentinels.
var (
	// ErrInvalidRequest is a request or message field that breaks the wire
	// contract. Replies carry it as the error type "InvalidRequest".
	ErrInvalidRequest = errors.New("invalid request")
	// ErrInvalidToken is an identifier that cannot be a subject token: it
	// must be 1–128 characters of [A-Za-z0-9_-]. It also matches
	// ErrInvalidRequest.
	ErrInvalidToken = errors.New("invalid subject token")
	// ErrInvalidConfig is a configuration field out of range; the message
	// names the field.
	ErrInvalidConfig = errors.New("bus: invalid config")
	// ErrUnknownEncoding is a body whose Content-Type names neither JSON nor
	// msgpack, or that has no Content-Type and is neither a JSON object nor a
	// msgpack map.
	ErrUnknownEncoding = errors.New("bus: unknown encoding")
	// ErrMalformed is a body that does not decode as the expected message.
	ErrMalformed = errors.New("bus: malformed body")
	// ErrUnknownEventType is an envelope whose type names no event this
	// package knows. The envelope itself decodes; only its Event fails.
	ErrUnknownEventType = errors.New("bus: unknown event type")
	// ErrIncompatibleStream is an existing stream or bucket whose settings
	// cannot be reconciled with the configured ones (for example a
	// different retention policy). Provisioning refuses to go on.
	ErrIncompatibleStream = errors.New("bus: existing stream has incompatible settings")
	// ErrStreamMissing is a stream that Provision has not created yet.
	ErrStreamMissing = errors.New("bus: stream not provisioned")
	// ErrPublish is an event that could not be stored, even after retries.
	// A run publisher that returned it is broken: every later call returns
	// it too, and the owner should stop the run as if it had crashed.
	ErrPublish = errors.New("bus: event publish failed")
	// ErrPublisherClosed is a call on a closed run publisher.
	ErrPublisherClosed = errors.New("bus: run publisher closed")
	// ErrTailClosed is a call on a closed tail.
	ErrTailClosed = errors.New("bus: tail closed")
	// ErrUnavailable is a broker that cannot answer for now: a timeout, no
	// responders, no response from a stream, a leader election or a
	// cluster still forming (see IsTransient), after the retries the call
	// allows (PublisherConfig.OutageBudget; until the context ends for
	// Provision). It also matches loop.ErrUnavailable: a run that meets it
	// is interrupted and released, not failed.
	ErrUnavailable error = &transientError{"bus: jetstream unavailable"}
)

// transientError is a sentinel that also matches loop.ErrUnavailable.
type transientError struct{ msg string }

func (e *transientError) Error() string { return e.msg }

// Is matches loop.ErrUnavailable.
func (e *transientError) Is(target error) bool { return target == loop.ErrUnavailable }

// transientAPICodes are the JetStream API error codes of a server that
// cannot answer for now: 10008 "JetStream system temporarily unavailable"
// (no meta or stream leader yet), 10009 "JetStream cluster can not handle
// request" (a leader change), 10163 "expected last sequence per subject
// temporarily unavailable" (a new stream leader catching up), 10158
// "duplicate message id is in process" (a republish while the first
// publish of the same message id is still being proposed, as after a
// leader change).
var transientAPICodes = map[jetstream.ErrorCode]bool{10008: true, 10009: true, 10163: true, 10158: true}

// IsTransient reports whether err may pass by itself: a timeout
// (context.DeadlineExceeded, nats.ErrTimeout), no responders, no response
// from a stream, a connection being re-established, the API errors of a
// leader election or of a cluster not ready, or an error of this package
// or package store that already says so (it matches loop.ErrUnavailable).
// A closed connection and a cancelled context are not transient: they do
// not come back.
func IsTransient(err error) bool {
	var ae *jetstream.APIError
	switch {
	case err == nil, errors.Is(err, context.Canceled),
		errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, jetstream.ErrConnectionClosed),
		errors.Is(err, nats.ErrConnectionDraining):
		return false
	case errors.Is(err, loop.ErrUnavailable),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrDisconnected), errors.Is(err, nats.ErrNoServers),
		errors.Is(err, jetstream.ErrServerShutdown):
		return true
	case errors.As(err, &ae):
		return transientAPICodes[ae.ErrorCode]
	}
	return false
}

// FieldError is a field that breaks the wire contract. It names the field
// (a JSON path such as "input[2].role") and matches ErrInvalidRequest, and
// ErrInvalidToken too when the field is an identifier.
type FieldError struct {
	Field  string
	Reason string
	token  bool
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("invalid request: %s: %s", e.Field, e.Reason)
}

// Is matches ErrInvalidRequest, and ErrInvalidToken for identifiers.
func (e *FieldError) Is(target error) bool {
	return target == ErrInvalidRequest || (e.token && target == ErrInvalidToken)
}

// DecodeError is a body that could not be decoded. It matches ErrMalformed
// (or ErrUnknownEncoding / ErrUnknownEventType when that is the cause) and
// wraps the codec's error.
type DecodeError struct {
	// What names the message ("run request", "event envelope", …).
	What     string
	Encoding Encoding
	Err      error
}

func (e *DecodeError) Error() string {
	if e.Encoding == "" {
		return fmt.Sprintf("bus: decode %s: %v", e.What, e.Err)
	}
	return fmt.Sprintf("bus: decode %s (%s): %v", e.What, e.Encoding, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Is matches ErrMalformed unless the cause is a more specific sentinel.
func (e *DecodeError) Is(target error) bool {
	if target != ErrMalformed {
		return false
	}
	return !errors.Is(e.Err, ErrUnknownEncoding) && !errors.Is(e.Err, ErrUnknownEventType)
}

// IncompatibleError names the stream and the settings that differ. It
// matches ErrIncompatibleStream.
type IncompatibleError struct {
	Stream string
	// Diffs are "field: have X, want Y" descriptions.
	Diffs []string
}

func (e *IncompatibleError) Error() string {
	return fmt.Sprintf("bus: stream %s exists with incompatible settings (%s)\n  hint: the server cannot change these in place; "+
		"delete the stream (nats stream rm %s) if its data may go, or change the configuration to match it",
		e.Stream, strings.Join(e.Diffs, "; "), e.Stream)
}

// Is matches ErrIncompatibleStream.
func (e *IncompatibleError) Is(target error) bool { return target == ErrIncompatibleStream }

// PublishError is an event that could not be stored. It matches ErrPublish
// and wraps the last backend error.
type PublishError struct {
	RunID string
	Seq   uint64
	Err   error
}

func (e *PublishError) Error() string {
	return fmt.Sprintf("bus: publish event %s.%d: %v", e.RunID, e.Seq, e.Err)
}

func (e *PublishError) Unwrap() error { return e.Err }

// Is matches ErrPublish, and ErrUnavailable (so loop.ErrUnavailable) when
// the last backend error was transient: the events could not be stored
// during an outage that outlasted the budget.
func (e *PublishError) Is(target error) bool {
	return target == ErrPublish || (target == ErrUnavailable || target == loop.ErrUnavailable) && IsTransient(e.Err)
}

// configError names a bad configuration field.
func configError(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}
