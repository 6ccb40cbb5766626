package bus

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinels. Every error this package returns matches at most one of these
// with errors.Is (a field error matches both ErrInvalidToken and
// ErrInvalidRequest); backend errors stay reachable through the chain, so
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
)

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

// Is matches ErrPublish.
func (e *PublishError) Is(target error) bool { return target == ErrPublish }

// configError names a bad configuration field.
func configError(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}
