package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/internal/jsapi"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Sentinels. Every error a store returns names the operation and the id it
// worked on and wraps one of these (or one of package loop's:
// [loop.ErrFenced], [loop.ErrNoSnapshot], [loop.ErrMailboxTokenEmpty]) and,
// when NATS said no, the NATS error too, so callers can match either:
//
//	store: checkpoint append run-1: checkpoint fenced: another writer owns this run: nats: API error: code=400 err_code=10071 …
var (
	// ErrInvalidID: a run id, session id or mailbox token is not 1–128
	// characters of [A-Za-z0-9_-] (docs/protocol.md#identifiers).
	ErrInvalidID = errors.New("invalid id")
	// ErrInvalidArgument: an argument is out of range (a negative count).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrInvalidConfig: Config.validate refused a field; the message names it.
	ErrInvalidConfig = errors.New("invalid store config")
	// ErrBucketNotFound: a bucket the store binds to does not exist. Create
	// it with [EnsureBuckets].
	ErrBucketNotFound = errors.New("bucket not found (run store.EnsureBuckets)")
	// ErrTimeout: a network call hit its deadline (the caller's, or
	// Config.Timeout when the caller's context had none). The outcome of a
	// write that timed out is unknown. It is transient: it also matches
	// [loop.ErrUnavailable].
	ErrTimeout error = &transientError{"timeout"}
	// ErrUnavailable: the connection is closed, JetStream did not answer
	// (no responders, no response from the stream) or said it cannot
	// answer for now (a leader election, a cluster not formed yet:
	// "JetStream system temporarily unavailable"). It is transient: it also
	// matches [loop.ErrUnavailable], so a run that meets it after the
	// store's own retries ([Config.OutageBudget]) is interrupted, not
	// failed.
	ErrUnavailable error = &transientError{"jetstream unavailable"}
	// ErrTooLarge: a value exceeds Config.MaxValueSize, or the server
	// refused a message as too large.
	ErrTooLarge = errors.New("value too large")
	// ErrCorrupt: a stored value does not decode, or a checkpoint's batch
	// chain is broken.
	ErrCorrupt = errors.New("corrupt stored value")
	// ErrConflict: a compare-and-set lost to a concurrent writer (after the
	// retries the operation allows).
	ErrConflict = errors.New("revision conflict")
	// ErrBaseMismatch: a checkpoint write's Base is not the stored entry
	// count. It comes together with [loop.ErrFenced].
	ErrBaseMismatch = errors.New("checkpoint base mismatch")
	// ErrRunExists: [Runs.Create] found the run indexed already.
	ErrRunExists = errors.New("run exists")
	// ErrRunNotFound: the run index has no record for the run.
	ErrRunNotFound = errors.New("run not found")
	// ErrBackend: any other JetStream error.
	ErrBackend = errors.New("jetstream error")
)

// transientError is a sentinel of a failure that may pass by itself. It
// matches [loop.ErrUnavailable] too.
type transientError struct{ msg string }

func (e *transientError) Error() string { return e.msg }

// Is matches loop.ErrUnavailable.
func (e *transientError) Is(target error) bool { return target == loop.ErrUnavailable }

// IsTransient reports whether err is a failure that may pass by itself (a
// timeout, no responders, a leader election, a cluster not ready) rather
// than one about the request: a store error that matches [ErrTimeout] or
// [ErrUnavailable], or a raw NATS error that classify maps to them.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, loop.ErrUnavailable) {
		return true
	}
	c := classify(err)
	return c == ErrTimeout || c == ErrUnavailable
}

// retryable reports whether a raw NATS error is worth trying again on the
// same connection: transient, and not a closed or draining connection
// (which never comes back) nor a cancelled context.
func retryable(err error) bool {
	switch {
	case err == nil, errors.Is(err, context.Canceled),
		errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionDraining),
		errors.Is(err, jetstream.ErrConnectionClosed), errors.Is(err, jetstream.ErrJetStreamNotEnabled):
		return false
	}
	return IsTransient(err)
}

// transientAPICodes are the JetStream API error codes of a server that
// cannot answer for now: 10008 "JetStream system temporarily unavailable"
// (no meta or stream leader yet), 10009 "JetStream cluster can not handle
// request" (a leader change), 10163 "expected last sequence per subject
// temporarily unavailable" (a new stream leader catching up), 10158
// "duplicate message id is in process" (a republish while the first
// publish of the same message id is still being proposed, as after a
// leader change), 10164 "wrong last sequence" without a sequence (a
// compare-and-set while another on the same subject or filter is still
// being proposed — its retry, after a leader change: once that one is
// decided, the retry finds its own write or loses the compare-and-set).
var transientAPICodes = map[jetstream.ErrorCode]bool{10008: true, 10009: true, 10163: true, 10158: true, 10164: true}

// transientAPI reports whether err is a JetStream API error of a server
// that cannot answer for now.
func transientAPI(err error) bool {
	var ae *jetstream.APIError
	if errors.As(err, &ae) && transientAPICodes[ae.ErrorCode] {
		return true
	}
	var je *jsapi.Error
	return errors.As(err, &je) && transientAPICodes[je.ErrCode]
}

// wrapErr translates a NATS error at the boundary: "store: <op> <id>:
// <sentinel>: <nats error>".
func wrapErr(op, id string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("store: %s %s: %w", op, id, err)
	}
	return fmt.Errorf("store: %s %s: %w: %w", op, id, classify(err), err)
}

// classify maps a NATS error to the sentinel that describes it.
func classify(err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return ErrTimeout
	case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		return ErrConflict
	case errors.Is(err, jetstream.ErrBucketNotFound), errors.Is(err, jetstream.ErrStreamNotFound), jsapi.StreamNotFound(err):
		return ErrBucketNotFound
	case errors.Is(err, nats.ErrMaxPayload), errors.Is(err, jetstream.ErrStreamMessageExceedsMaximum):
		return ErrTooLarge
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionDraining),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, jetstream.ErrConnectionClosed), errors.Is(err, jetstream.ErrServerShutdown),
		errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, nats.ErrNoServers),
		errors.Is(err, nats.ErrDisconnected), transientAPI(err):
		return ErrUnavailable
	}
	return ErrBackend
}

// isCAS reports whether err is a lost compare-and-set (the key exists, or
// its revision moved on) — a definite refusal, unlike a timeout.
func isCAS(err error) bool {
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}

// isNotFound reports whether err says a key is absent or deleted.
func isNotFound(err error) bool {
	return errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted)
}
