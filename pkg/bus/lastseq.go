package bus

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/internal/jsapi"
)

// LastSeq returns the seq of the last event stored for a run, or 0 when it
// has none: the larger of the Lovia-Seq and Lovia-High-Seq headers of the
// last message on the run's subject. It reads that message from the
// stream leader (see LastEvent). Errors match ErrStreamMissing when the
// events stream does not exist.
func (p *Publisher) LastSeq(ctx context.Context, runID string) (uint64, error) {
	last, err := p.LastEvent(ctx, runID)
	if err != nil || last == nil {
		return 0, err
	}
	return last.HighSeq, nil
}

// StoredEvent is the last event of a run as the stream holds it.
type StoredEvent struct {
	*Envelope
	// Stored is when the server stored it (the cluster's clock, comparable
	// with a request's stream timestamp, unlike Envelope.Time, which is the
	// publishing worker's).
	Stored time.Time
	// HighSeq is the highest seq published for the run when it was stored:
	// the larger of its seq and its Lovia-High-Seq header.
	HighSeq uint64
	// Request is the stream sequence of the run request whose claim
	// published it (HeaderRequest), 0 when it was not stamped.
	Request uint64
}

// LastEvent returns the last event stored for a run, or nil when it has
// none. It reads from the stream leader ($JS.API.STREAM.MSG.GET), not by
// direct get: a direct get may be answered by a lagging replica, and a
// stale last event would make a resuming worker's first events collide with
// stored ones, or take an ended submission for a live one. Errors match
// ErrStreamMissing when the events stream does not exist.
func (p *Publisher) LastEvent(ctx context.Context, runID string) (*StoredEvent, error) {
	subject, err := p.names.Events(runID)
	if err != nil {
		return nil, err
	}
	ctx, cancel := withDefaultTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	stream := p.names.EventsStream()
	msg, err := jsapi.LeaderGet(ctx, p.js, stream, jsapi.LastBySubject(subject))
	if err != nil {
		return nil, fmt.Errorf("bus: last event of run %s: %w", runID, streamMissing(err, stream))
	}
	if msg == nil {
		return nil, nil
	}
	var hdr nats.Header
	if len(msg.Header) > 0 {
		if hdr, err = nats.DecodeHeadersMsg(msg.Header); err != nil {
			return nil, fmt.Errorf("bus: last event of run %s: bad headers: %w", runID, err)
		}
	}
	env, err := DecodeEnvelope(hdr, msg.Data)
	if err != nil {
		seq := HeaderUint(hdr, HeaderSeq)
		if seq == 0 {
			return nil, fmt.Errorf("bus: last event of run %s: %w", runID, err)
		}
		// Its headers still say where the run's seqs stand.
		env = &Envelope{RunID: runID, Seq: seq}
	}
	return &StoredEvent{Envelope: env, Stored: msg.Time, HighSeq: max(env.Seq, HeaderUint(hdr, HeaderHighSeq)),
		Request: HeaderUint(hdr, HeaderRequest)}, nil
}

// RequestStored reports whether the runs stream still holds the run request
// stored at seq: true while it waits for a worker or is being worked on,
// false once a worker acknowledged or terminated it, or the stream dropped
// it (max age, a purge, a lost write). It asks the stream leader, so a
// lagging replica never reports a request missing.
func RequestStored(ctx context.Context, js jetstream.JetStream, names Names, seq uint64) (bool, error) {
	stream := names.RunsStream()
	msg, err := jsapi.LeaderGet(ctx, js, stream, jsapi.BySeq(seq))
	if err != nil {
		return false, fmt.Errorf("bus: run request %d: %w", seq, streamMissing(err, stream))
	}
	return msg != nil, nil
}

// streamMissing makes the API's "stream not found" match ErrStreamMissing.
func streamMissing(err error, stream string) error {
	if jsapi.StreamNotFound(err) {
		return fmt.Errorf("%w: %s: %w", ErrStreamMissing, stream, err)
	}
	return err
}

// HeaderUint parses a decimal header, 0 when absent or malformed.
func HeaderUint(h nats.Header, key string) uint64 {
	n, err := strconv.ParseUint(headerValue(h, key), 10, 64)
	if err != nil {
		return 0
	}
	return n
}
