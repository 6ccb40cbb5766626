package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// PublisherConfig configures a Publisher. Zero fields take the documented
// defaults (see WithDefaults).
type PublisherConfig struct {
	// Prefix names the subjects and the events stream. Default "lovia".
	Prefix string
	// MaxPending bounds the events of one run published but not yet
	// acknowledged; Publish waits for the oldest ack past it. Default 256.
	MaxPending int
	// AckTimeout is how long an ack may take before the event counts as
	// failed and is published again (deduplication makes that safe).
	// Default 5s.
	AckTimeout time.Duration
	// RetryAttempts is how many more times a failed event is published,
	// synchronously and in seq order, before the run publisher gives up
	// with ErrPublish. Default 3.
	RetryAttempts int
	// RetryWait is the pause between those attempts. Default 250ms.
	RetryWait time.Duration
	// OutageBudget bounds how long an event whose publish failed with a
	// transient error (see IsTransient: a timeout, no response from the
	// stream, a leader election) is published again, with jittered
	// exponential backoff, before the run publisher gives up with a
	// PublishError that matches ErrUnavailable (and loop.ErrUnavailable).
	// RetryAttempts still bounds the other failures. Cancelling the
	// context stops at once. Default 2m; negative means no such retries.
	OutageBudget time.Duration
	// Timeout bounds calls whose context has no deadline (LastSeq, Flush,
	// a Publish that waits for room). Default 10s.
	Timeout time.Duration
	// Clock stamps envelopes. Default time.Now.
	Clock func() time.Time
	// Logger reports retries and duplicates. Default: discards.
	Logger *slog.Logger
}

// Defaults of PublisherConfig.
const (
	DefaultMaxPending    = 256
	DefaultAckTimeout    = 5 * time.Second
	DefaultRetryAttempts = 3
	DefaultRetryWait     = 250 * time.Millisecond
	DefaultCallTimeout   = 10 * time.Second
	DefaultOutageBudget  = 2 * time.Minute
)

// WithDefaults returns c with every zero field set to its default.
func (c PublisherConfig) WithDefaults() PublisherConfig {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	c.MaxPending = orInt(c.MaxPending, DefaultMaxPending)
	c.AckTimeout = orDuration(c.AckTimeout, DefaultAckTimeout)
	c.RetryAttempts = orInt(c.RetryAttempts, DefaultRetryAttempts)
	c.RetryWait = orDuration(c.RetryWait, DefaultRetryWait)
	c.Timeout = orDuration(c.Timeout, DefaultCallTimeout)
	c.OutageBudget = orDuration(c.OutageBudget, DefaultOutageBudget)
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c PublisherConfig) validate() error {
	switch {
	case ValidateID("prefix", c.Prefix) != nil:
		return configError("Prefix", "%v", ValidateID("prefix", c.Prefix))
	case c.MaxPending < 1:
		return configError("MaxPending", "must be positive")
	case c.AckTimeout < 0:
		return configError("AckTimeout", "must not be negative")
	case c.RetryAttempts < 0:
		return configError("RetryAttempts", "must not be negative")
	case c.RetryWait < 0:
		return configError("RetryWait", "must not be negative")
	case c.Timeout < 0:
		return configError("Timeout", "must not be negative")
	}
	return nil
}

// Publisher publishes run events to the events stream. It is safe for
// concurrent use; one serves every run of a process. It needs no closing:
// its events and acks go through the connection's [JetStreamPublisher],
// whose reply subscription and watcher end with the connection.
type Publisher struct {
	js    jetstream.JetStream
	jsp   *JetStreamPublisher // the connection's: events go out and acks come back on it
	cfg   PublisherConfig
	names Names
	// syncOpts are the options of every republish: no no-responder
	// retries of its own (publishSync has the publisher's).
	syncOpts []PublishOpt
}

// NewPublisher returns a publisher over js.
func NewPublisher(js jetstream.JetStream, cfg PublisherConfig) (*Publisher, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	names, _ := NewNames(cfg.Prefix)
	return &Publisher{js: js, jsp: NewJetStreamPublisher(js.Conn()), cfg: cfg, names: names,
		syncOpts: []PublishOpt{PublishRetries(0, 0)}}, nil
}

// Open returns a publisher for one run that continues after the last event
// stored for it (seq 1 for a new run), so a worker that resumes a run goes
// on without gaps or duplicate seqs. The read goes to the stream leader
// (see LastSeq). Events are encoded in enc.
func (p *Publisher) Open(ctx context.Context, runID string, enc Encoding) (*RunPublisher, error) {
	if err := ValidateID("run_id", runID); err != nil {
		return nil, err
	}
	last, err := p.LastSeq(ctx, runID)
	if err != nil {
		return nil, err
	}
	return p.Resume(runID, enc, last)
}

// Resume returns a publisher for one run whose next event is lastSeq+1,
// without asking the server. Use Open unless lastSeq is known to be the
// stream's: a stale lastSeq makes new events collide with stored ones and
// be dropped as duplicates.
func (p *Publisher) Resume(runID string, enc Encoding, lastSeq uint64) (*RunPublisher, error) {
	subject, err := p.names.Events(runID)
	if err != nil {
		return nil, err
	}
	if !enc.Valid() {
		return nil, fmt.Errorf("%w: %q", ErrUnknownEncoding, enc)
	}
	return &RunPublisher{p: p, runID: runID, subject: subject, enc: enc, next: lastSeq + 1, acked: lastSeq}, nil
}

// RunPublisher publishes the events of one run: it numbers them, builds
// their envelopes and headers, and publishes them asynchronously with at
// most MaxPending awaiting an ack. Flush waits for every ack; call it at
// checkpoints and after the terminal event.
//
// A failed publish is retried in seq order (Nats-Msg-Id makes a retry of a
// stored event a no-op). When retries run out the publisher is broken:
// every later call returns the *PublishError (ErrPublish), and the owner
// should stop the run as after a crash; a new owner continues with Open.
// Methods are safe for concurrent use but serialize.
type RunPublisher struct {
	p       *Publisher
	runID   string
	subject string
	enc     Encoding

	request string       // HeaderRequest of every event, if set
	trace   TraceContext // traceparent and tracestate of every event, if set

	mu      sync.Mutex
	timer   *time.Timer   // of settleOldest's waits
	notify  chan struct{} // signalled when an ack of this run's events comes in
	next    uint64
	acked   uint64
	pending []*pendingEvent
	dups    int
	err     error
	closed  bool
	// hdr is the header map of every first publish, rewritten for each
	// event: nats.go serializes a message's headers within the publish
	// call, so the map is free again once publishAsync returns.
	hdr nats.Header
	// free holds events whose publish is over, for reuse with their data
	// buffer (see recycle); nfree of them.
	free  [maxFree]*pendingEvent
	nfree int
}

// initialPending is the room for pending events a run publisher starts
// with: a checkpoint's worth of a short run.
const initialPending = 16

// maxFree bounds the events a run publisher keeps for reuse: a
// checkpoint's worth, as many as come back at a flush of a short run.
const maxFree = initialPending

// maxReusedData bounds the data buffer a recycled event keeps: a larger
// one (a big tool result, say) is left to the collector rather than held
// for the life of the run.
const maxReusedData = 16 << 10

// pendingEvent is one published event awaiting its ack, kept for a
// republish in order. Its fields are reset for reuse (see newPending).
type pendingEvent struct {
	seq  uint64
	wait ackWait // its ack, or why none came (settled at once when the publish failed)
	sent time.Time
	// m is the message: Data the envelope (in a buffer reused from event
	// to event), Header set only while it is being published.
	m nats.Msg
	// vals are the header values of its first publish, trace context
	// included, from which a republish writes the same headers.
	vals eventVals
}

// RunID is the run's id.
func (r *RunPublisher) RunID() string { return r.runID }

// SetRequest stamps every event published from now on with the run
// request's stream sequence (HeaderRequest), so that a later claim can tell
// this submission's events from an earlier submission's. 0 stops stamping.
func (r *RunPublisher) SetRequest(streamSeq uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.request = ""
	if streamSeq > 0 {
		r.request = strconv.FormatUint(streamSeq, 10)
	}
}

// SetTrace stamps every event published from now on with the W3C trace
// context t (docs/protocol.md#trace-context): the trace of the claim that
// publishes them. The zero value stops stamping (and adds nothing to an
// event).
func (r *RunPublisher) SetTrace(t TraceContext) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trace = t
}

// Encoding is the events' encoding.
func (r *RunPublisher) Encoding() Encoding { return r.enc }

// NextSeq is the seq the next Publish will use.
func (r *RunPublisher) NextSeq() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next
}

// Acked is the highest seq known stored with every seq before it.
func (r *RunPublisher) Acked() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.acked
}

// Pending is the number of events awaiting an ack.
func (r *RunPublisher) Pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending)
}

// Duplicates counts first publishes the stream reported as duplicates: a
// seq that was already stored, by an earlier owner of the run for
// instance. Retries are not counted.
func (r *RunPublisher) Duplicates() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dups
}

// Publish numbers ev with the next seq, publishes it asynchronously and
// returns the seq. It blocks only while MaxPending events await acks, or
// while the connection is down and earlier events await theirs. An
// event larger than the server's max payload is refused before anything
// is sent (the seq is not used, the publisher stays usable); so is a
// context that ends while waiting for room.
func (r *RunPublisher) Publish(ctx context.Context, ev loop.Event) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.usable(); err != nil {
		return 0, err
	}
	seq := r.next
	if err := checkEventID(r.runID, seq); err != nil {
		return 0, err
	}
	// The envelope goes into a pooled buffer; the message gets a copy of
	// the right size (held until the ack, for a republish).
	w := marshalWriters.Get().(*envelopeWriter)
	defer putMarshalWriter(w)
	enc, err := w.event(r.enc, r.runID, seq, r.p.cfg.Clock(), ev)
	if err != nil {
		return 0, err
	}
	if limit := r.p.js.Conn().MaxPayload(); limit > 0 && int64(len(enc)) > limit {
		return 0, fmt.Errorf("bus: publish %s event %s: %d bytes exceed the server's max payload of %d: %w",
			ev.Type(), eventMsgID(r.runID, seq), len(enc), limit, nats.ErrMaxPayload)
	}
	// Send nothing past a known failure, or into a reconnect buffer while
	// earlier events may be lost: either would store this event before
	// them. Settle first.
	if err := r.reap(ctx); err != nil {
		return 0, err
	}
	if err := r.makeRoom(ctx); err != nil {
		return 0, err
	}
	// One allocation holds the event's bookkeeping, message and header
	// values, and it is reused after the ack, with its data buffer (the
	// envelope is copied into it: the pooled one goes back).
	pe := r.newPending()
	pe.seq, pe.sent = seq, time.Now()
	pe.m.Subject = r.subject
	pe.m.Data = append(pe.m.Data[:0], enc...)
	pe.vals.set(r.runID, seq, ev.Type(), r.enc, r.request, r.trace)
	r.hdr = eventHeaders(r.hdr, &pe.vals)
	pe.m.Header = r.hdr
	// No retries here: they would resend out of order. Failures come back
	// here and are retried in seq order by repair. A publish stalled past
	// AckTimeout behind too many of the connection's awaiting acks fails
	// (jetstream.ErrTooManyStalledMsgs) and is retried the same way.
	err = r.p.jsp.publishAsync(&pe.m, &pe.wait, r.p.cfg.AckTimeout)
	// The headers are serialized (or were never needed): the map is the
	// next event's, and a republish writes its own from pe.vals.
	pe.m.Header = nil
	if err != nil {
		pe.wait.err = err
		pe.wait.done.Store(true)
		r.p.cfg.Logger.Warn("bus: async publish failed, will retry", "run_id", r.runID, "seq", seq, "err", err)
	}
	if r.pending == nil {
		r.pending = make([]*pendingEvent, 0, initialPending)
	}
	r.pending = append(r.pending, pe)
	r.next++
	return seq, nil
}

// newPending returns an event to publish with: a recycled one, reset
// but for its data buffer, or a new one. Lock held.
func (r *RunPublisher) newPending() *pendingEvent {
	if r.nfree == 0 {
		if r.notify == nil {
			r.notify = make(chan struct{}, 1)
		}
		pe := &pendingEvent{}
		// Set once: a recycled event keeps it, since the resolve that
		// settled its last wait may still be reading it (to signal).
		pe.wait.notify = r.notify
		return pe
	}
	r.nfree--
	pe := r.free[r.nfree]
	r.free[r.nfree] = nil
	// Every field but the data buffer starts afresh, field by field:
	// wait.notify is not written at all (it is r.notify already).
	pe.seq, pe.sent = 0, time.Time{}
	pe.wait.id, pe.wait.sync = 0, false
	pe.wait.done.Store(false)
	pe.wait.ack, pe.wait.err = jetstream.PubAck{}, nil
	pe.m = nats.Msg{Data: pe.m.Data[:0]}
	pe.vals = eventVals{}
	return pe
}

// recycle keeps pe, taken off pending, for a later event: only once its
// publish is over for the JetStreamPublisher too, that is once its wait
// was seen settled (resolve dropped it from the acks first) or was
// forgotten. Lock held.
func (r *RunPublisher) recycle(pe *pendingEvent) {
	if r.nfree == len(r.free) {
		return
	}
	if cap(pe.m.Data) > maxReusedData {
		pe.m.Data = nil
	}
	r.free[r.nfree] = pe
	r.nfree++
}

// makeRoom waits (within Timeout when ctx has no deadline) while
// MaxPending events await acks, or while the connection is down and
// earlier events await theirs. Lock held.
func (r *RunPublisher) makeRoom(ctx context.Context) error {
	full := func() bool {
		return len(r.pending) > 0 && (len(r.pending) >= r.p.cfg.MaxPending || !r.p.js.Conn().IsConnected())
	}
	if !full() {
		return nil
	}
	deadline := r.waitDeadline(ctx)
	for full() {
		if err := r.settleOldest(ctx, deadline); err != nil {
			return err
		}
	}
	return nil
}

// waitDeadline is when a wait for acks under ctx ends: ctx's own deadline
// (the zero time: none but ctx's), else Timeout from now.
func (r *RunPublisher) waitDeadline(ctx context.Context) time.Time {
	if _, ok := ctx.Deadline(); ok || r.p.cfg.Timeout <= 0 {
		return time.Time{}
	}
	return time.Now().Add(r.p.cfg.Timeout)
}

// Flush waits until every published event is stored. It returns the
// *PublishError of an event that could not be stored, or the context's
// error (wrapped, naming the seq it waited for) if ctx ends first, in which
// case Flush may be called again. Without a deadline on ctx it waits at
// most Timeout.
func (r *RunPublisher) Flush(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	if len(r.pending) == 0 {
		return nil
	}
	deadline := r.waitDeadline(ctx)
	for len(r.pending) > 0 {
		if err := r.settleOldest(ctx, deadline); err != nil {
			return err
		}
	}
	return nil
}

// Close flushes and closes the publisher; later calls return
// ErrPublisherClosed. Closing twice is a no-op.
func (r *RunPublisher) Close(ctx context.Context) error {
	if err := r.Flush(ctx); err != nil && !errors.Is(err, ErrPublisherClosed) {
		return err
	}
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	return nil
}

func (r *RunPublisher) usable() error {
	if r.err != nil {
		return r.err
	}
	if r.closed {
		return ErrPublisherClosed
	}
	return nil
}

// reap drops the events already acknowledged from the front of pending,
// without waiting, and repairs at once (within ctx) if the oldest one
// failed. Lock held.
func (r *RunPublisher) reap(ctx context.Context) error {
	for len(r.pending) > 0 {
		pe := r.pending[0]
		if !pe.wait.settled() {
			return nil
		}
		if pe.wait.err != nil {
			return r.repair(ctx)
		}
		r.acknowledged(pe, &pe.wait.ack)
	}
	return nil
}

func (r *RunPublisher) acknowledged(pe *pendingEvent, ack *jetstream.PubAck) {
	if ack.Duplicate {
		r.dups++
		r.p.cfg.Logger.Warn("bus: event seq was already stored", "run_id", r.runID, "seq", pe.seq)
	}
	r.popPending()
	r.acked = pe.seq
	r.recycle(pe) // its wait is settled: reap and settled saw it so
}

// popPending drops the oldest pending event, keeping the slice's front so
// that appends reuse its array. Lock held.
func (r *RunPublisher) popPending() {
	n := copy(r.pending, r.pending[1:])
	r.pending[n] = nil
	r.pending = r.pending[:n]
}

// settleOldest waits (within ctx, until deadline unless it is zero) for the
// oldest pending event's outcome. A failure (error, or no ack within
// AckTimeout) starts repair, within ctx alone, since republishing through
// an outage may take up to OutageBudget. Lock held.
func (r *RunPublisher) settleOldest(ctx context.Context, deadline time.Time) error {
	pe := r.pending[0]
	if r.p.js.Conn().IsClosed() {
		// No ack will come on a closed connection: fail now, not after the
		// ack timeout (a worker whose connection died stops promptly).
		r.err = &PublishError{RunID: r.runID, Seq: pe.seq, Err: nats.ErrConnectionClosed}
		return r.err
	}
	if pe.wait.settled() {
		// Already settled (the common case at a flush): no timer.
		return r.settled(ctx, pe)
	}
	// One timer, the publisher's: the ack timeout or, if sooner, the
	// deadline.
	ackBy := pe.sent.Add(r.p.cfg.AckTimeout)
	wake := ackBy
	if !deadline.IsZero() && deadline.Before(ackBy) {
		wake = deadline
	}
	timer := r.timerFor(time.Until(wake))
	defer timer.Stop()
	for {
		select {
		case <-r.notify:
			// Some ack of this run came in: the oldest's, or a later one.
			if pe.wait.settled() {
				return r.settled(ctx, pe)
			}
		case <-timer.C:
			if wake.Equal(ackBy) {
				r.p.cfg.Logger.Warn("bus: event ack timed out, retrying in order", "run_id", r.runID, "seq", pe.seq)
				return r.repair(ctx)
			}
			return fmt.Errorf("bus: waiting for the ack of event %s.%d: %w", r.runID, pe.seq, context.DeadlineExceeded)
		case <-ctx.Done():
			return fmt.Errorf("bus: waiting for the ack of event %s.%d: %w", r.runID, pe.seq, context.Cause(ctx))
		}
	}
}

// settled takes in the outcome of the oldest pending event, which is in:
// its ack, or a failure that starts repair. Lock held.
func (r *RunPublisher) settled(ctx context.Context, pe *pendingEvent) error {
	if err := pe.wait.err; err != nil {
		r.p.cfg.Logger.Warn("bus: event publish failed, retrying in order", "run_id", r.runID, "seq", pe.seq, "err", asyncErr(err))
		return r.repair(ctx)
	}
	r.acknowledged(pe, &pe.wait.ack)
	return nil
}

// timerFor returns the publisher's timer, set to fire after d. The caller
// stops it. Lock held.
func (r *RunPublisher) timerFor(d time.Duration) *time.Timer { return rearm(&r.timer, d) }

// repair publishes every pending event again, synchronously and in seq
// order, after the oldest one failed. Events that were stored after all
// come back as duplicates and are harmless. An event that was lost while
// later ones were stored (a connection that dropped mid-pipeline) is stored
// after them: Tail restores seq order, and the Lovia-High-Seq header keeps
// LastSeq right. Lock held.
func (r *RunPublisher) repair(ctx context.Context) error {
	// Acks of the first publishes that come in now are ignored: every
	// pending event is published again and acknowledged by that.
	for _, pe := range r.pending {
		r.p.jsp.forget(&pe.wait)
	}
	high := strconv.FormatUint(r.next-1, 10)
	for len(r.pending) > 0 {
		pe := r.pending[0]
		// The headers of the first publish again (the publisher's map has
		// moved on to later events, whose request or trace context may
		// differ), in a map of the event's own.
		pe.m.Header = eventHeaders(nil, &pe.vals)
		if pe.seq < r.next-1 {
			// It may land after higher seqs: record the high-water mark.
			pe.m.Header[HeaderHighSeq] = []string{high}
		}
		if err := r.publishSync(ctx, pe); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("bus: republishing event %s.%d: %w", r.runID, pe.seq, context.Cause(ctx))
			}
			r.err = &PublishError{RunID: r.runID, Seq: pe.seq, Err: err}
			r.pending = nil
			return r.err
		}
		r.popPending()
		r.acked = pe.seq
		r.recycle(pe) // forgotten above: nothing else touches its wait
	}
	return nil
}

// publishSync publishes pe until it is stored: transient failures again
// and again with jittered exponential backoff while OutageBudget allows,
// other failures RetryAttempts more times, RetryWait apart.
func (r *RunPublisher) publishSync(ctx context.Context, pe *pendingEvent) error {
	var (
		first    time.Time
		failures int
		bo       backoff
	)
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, r.p.cfg.AckTimeout)
		_, err := r.p.jsp.PublishMsg(actx, &pe.m, r.p.syncOpts...)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if first.IsZero() {
			first = time.Now()
		}
		var wait time.Duration
		if IsTransient(err) && r.p.cfg.OutageBudget > 0 {
			wait = bo.wait()
			if time.Since(first)+wait > r.p.cfg.OutageBudget {
				r.p.cfg.Logger.Warn("bus: event republish gave up after the outage budget", "run_id", r.runID, "seq", pe.seq,
					"attempts", attempt, "budget", r.p.cfg.OutageBudget, "err", err)
				return err
			}
		} else {
			failures++
			if failures > r.p.cfg.RetryAttempts {
				return err
			}
			wait = r.p.cfg.RetryWait
		}
		r.p.cfg.Logger.Warn("bus: event republish failed", "run_id", r.runID, "seq", pe.seq, "attempt", attempt, "err", err, "next_wait", wait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
