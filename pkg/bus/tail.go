package bus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TailerConfig configures a Tailer. Zero fields take the documented
// defaults (see WithDefaults).
type TailerConfig struct {
	// Prefix names the subjects and the events stream. Default "lovia".
	Prefix string
	// Timeout bounds creating and deleting a tail's consumer when the
	// context has no deadline. Default 10s.
	Timeout time.Duration
	// InactiveThreshold is how long the server keeps the consumer of a tail
	// that stopped reading without Close (a crashed viewer). Default 1m.
	InactiveThreshold time.Duration
	// Buffer is how many events a tail pulls ahead. Default 64.
	Buffer int
	// GapWait is how long a tail that has read everything stored waits for
	// a missing seq before it skips it. Default 25s: longer than a
	// publisher with the default PublisherConfig takes to publish a lost
	// event again (AckTimeout, then RetryAttempts tries), so that a tail
	// skips only gaps that will not fill.
	GapWait time.Duration
	// MaxReorder is how many events past a missing seq a tail holds back
	// before it skips the gap. Default 1024.
	MaxReorder int
	// Logger reports malformed events. Default: discards.
	Logger *slog.Logger
}

// Defaults of TailerConfig.
const (
	DefaultTailInactive = time.Minute
	DefaultTailBuffer   = 64
	DefaultTailGapWait  = 25 * time.Second
	DefaultTailReorder  = 1024
)

// WithDefaults returns c with every zero field set to its default.
func (c TailerConfig) WithDefaults() TailerConfig {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	c.Timeout = orDuration(c.Timeout, DefaultCallTimeout)
	c.InactiveThreshold = orDuration(c.InactiveThreshold, DefaultTailInactive)
	c.Buffer = orInt(c.Buffer, DefaultTailBuffer)
	c.GapWait = orDuration(c.GapWait, DefaultTailGapWait)
	c.MaxReorder = orInt(c.MaxReorder, DefaultTailReorder)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c TailerConfig) validate() error {
	switch {
	case ValidateID("prefix", c.Prefix) != nil:
		return configError("Prefix", "%v", ValidateID("prefix", c.Prefix))
	case c.Timeout < 0:
		return configError("Timeout", "must not be negative")
	case c.InactiveThreshold < time.Second:
		return configError("InactiveThreshold", "must be at least 1s")
	case c.Buffer < 1:
		return configError("Buffer", "must be positive")
	case c.GapWait < 0:
		return configError("GapWait", "must not be negative")
	case c.MaxReorder < 1:
		return configError("MaxReorder", "must be positive")
	}
	return nil
}

// Tailer opens tails of runs' events. It is safe for concurrent use and
// holds no goroutines of its own.
type Tailer struct {
	js    jetstream.JetStream
	cfg   TailerConfig
	names Names
}

// NewTailer returns a tailer over js.
func NewTailer(js jetstream.JetStream, cfg TailerConfig) (*Tailer, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	names, _ := NewNames(cfg.Prefix)
	return &Tailer{js: js, cfg: cfg, names: names}, nil
}

// TailOption chooses where a tail starts and when it ends.
type TailOption func(*tailOptions) error

type tailOptions struct {
	from   uint64 // first seq to deliver; 0 with live
	live   bool
	follow bool
	set    string // the start option given, to reject a second one
}

func (o *tailOptions) start(name string) error {
	if o.set != "" {
		return fmt.Errorf("bus: tail options %s and %s conflict: give one start", o.set, name)
	}
	o.set = name
	return nil
}

// FromStart delivers the run's events from its first one (the default).
func FromStart() TailOption {
	return func(o *tailOptions) error {
		o.from = 1
		return o.start("FromStart")
	}
}

// FromSeq delivers the events with seq ≥ seq (a viewer that saw seq-1
// resumes with FromSeq(seq)).
func FromSeq(seq uint64) TailOption {
	return func(o *tailOptions) error {
		if seq == 0 {
			return errors.New("bus: FromSeq: seqs start at 1")
		}
		o.from = seq
		return o.start("FromSeq")
	}
}

// Live delivers only events stored after the tail opens.
func Live() TailOption {
	return func(o *tailOptions) error {
		o.live = true
		return o.start("Live")
	}
}

// Follow keeps the tail open past terminal events, for a run that is
// resubmitted after a failure and appends another attempt. Without it a
// tail ends after the first terminal event it delivers.
func Follow() TailOption {
	return func(o *tailOptions) error {
		o.follow = true
		return nil
	}
}

// Tail opens a tail of a run's events. It reads through one ephemeral
// ordered consumer (in memory, R1, deleted by Close, and by the server
// after InactiveThreshold if Close is never called), never a durable one.
// The run need not exist yet: the tail waits for its first event.
func (t *Tailer) Tail(ctx context.Context, runID string, opts ...TailOption) (*Tail, error) {
	o := tailOptions{from: 1}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	subject, err := t.names.Events(runID)
	if err != nil {
		return nil, err
	}
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{subject},
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		InactiveThreshold: t.cfg.InactiveThreshold,
	}
	if o.live {
		cfg.DeliverPolicy = jetstream.DeliverNewPolicy
		o.from = 0
	}
	stream := t.names.EventsStream()
	cctx, cancel := withDefaultTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	cons, err := t.js.OrderedConsumer(cctx, stream, cfg)
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			err = fmt.Errorf("%w: %s: %w", ErrStreamMissing, stream, err)
		}
		return nil, fmt.Errorf("bus: tail run %s: %w", runID, err)
	}
	// OrderedConsumer created the consumer; Messages only subscribes.
	it, err := cons.Messages(jetstream.PullMaxMessages(t.cfg.Buffer))
	if err != nil {
		t.deleteConsumer(ctx, stream, cons)
		return nil, fmt.Errorf("bus: tail run %s: %w", runID, err)
	}
	return &Tail{t: t, runID: runID, stream: stream, cons: cons, it: it, opts: o, want: o.from,
		held: make(map[uint64]*Envelope), closed: make(chan struct{})}, nil
}

// Tail is an open tail of one run. Next returns its events decoded, in
// seq order, each seq once; after the terminal event (unless Follow) it
// returns io.EOF. Close releases the consumer. A Tail is for one reader:
// Next must not be called concurrently; Close may be called from any
// goroutine, and makes a blocked Next return ErrTailClosed.
//
// Events are normally stored in seq order. After a publisher lost part of
// its pipeline (a dropped connection) and published it again, some events
// are stored after higher seqs; the tail holds the later events back until
// the missing ones arrive. A gap that does not fill (events removed by the
// stream's limits, or a publisher that gave up) is skipped once the tail
// has read everything stored and waited GapWait more, or once MaxReorder
// events are held.
type Tail struct {
	t      *Tailer
	runID  string
	stream string
	cons   jetstream.Consumer
	it     jetstream.MessagesContext
	opts   tailOptions

	want     uint64               // next seq to deliver; 0 until the first event of a live tail
	held     map[uint64]*Envelope // events past a gap, by seq
	gapSince time.Time            // when the current gap was noticed
	caughtUp bool                 // the last message read had nothing stored after it
	done     bool                 // terminal event delivered

	closeOnce sync.Once
	closed    chan struct{}
}

// Next returns the next event. It blocks until one is stored, ctx ends
// (the context's error), or the tail is closed (ErrTailClosed). Events
// before the start and seqs already delivered (a duplicate stored outside
// the deduplication window) are skipped. A message that does not decode is
// returned as a *DecodeError (ErrMalformed) and the tail stays usable.
// After the terminal event, unless Follow, Next returns io.EOF.
func (tl *Tail) Next(ctx context.Context) (*Envelope, error) {
	for {
		if tl.done {
			return nil, io.EOF
		}
		select {
		case <-tl.closed:
			return nil, ErrTailClosed
		default:
		}
		if env, ok := tl.held[tl.want]; ok {
			delete(tl.held, tl.want)
			return tl.deliver(env), nil
		}
		rctx, cancel := ctx, context.CancelFunc(func() {})
		if len(tl.held) > 0 {
			deadline := tl.gapSince.Add(tl.t.cfg.GapWait)
			if len(tl.held) >= tl.t.cfg.MaxReorder || (tl.caughtUp && !time.Now().Before(deadline)) {
				tl.skipGap()
				continue
			}
			if tl.caughtUp {
				rctx, cancel = context.WithDeadline(ctx, deadline)
			}
		}
		msg, err := tl.it.Next(jetstream.NextContext(rctx))
		cancel()
		if err != nil {
			select {
			case <-tl.closed:
				return nil, ErrTailClosed
			default:
			}
			switch {
			case errors.Is(err, jetstream.ErrMsgIteratorClosed):
				return nil, ErrTailClosed
			case ctx.Err() != nil:
				return nil, context.Cause(ctx)
			case rctx.Err() != nil: // the gap did not fill in time
				tl.skipGap()
				continue
			}
			return nil, fmt.Errorf("bus: tail run %s: %w", tl.runID, err)
		}
		if md, err := msg.Metadata(); err == nil {
			tl.caughtUp = md.NumPending == 0
		}
		// The seq header lets us skip duplicates without decoding.
		if seq := HeaderUint(msg.Headers(), HeaderSeq); seq != 0 && tl.old(seq) {
			continue
		}
		env, err := DecodeEnvelope(msg.Headers(), msg.Data())
		if err != nil {
			tl.t.cfg.Logger.Warn("bus: malformed event", "run_id", tl.runID, "err", err)
			return nil, err
		}
		if env.RunID != tl.runID {
			return nil, &DecodeError{What: "event envelope", Encoding: env.Encoding,
				Err: &FieldError{Field: "run_id", Reason: fmt.Sprintf("%s on the subject of run %s", quote(env.RunID), tl.runID)}}
		}
		switch {
		case tl.old(env.Seq):
			continue
		case tl.want == 0 || env.Seq == tl.want:
			return tl.deliver(env), nil
		}
		if _, dup := tl.held[env.Seq]; !dup {
			if len(tl.held) == 0 {
				tl.gapSince = time.Now()
			}
			tl.held[env.Seq] = env
		}
	}
}

// old reports whether seq is before the start or already delivered.
func (tl *Tail) old(seq uint64) bool { return tl.want != 0 && seq < tl.want }

func (tl *Tail) deliver(env *Envelope) *Envelope {
	tl.want = env.Seq + 1
	if env.IsTerminal() && !tl.opts.follow {
		tl.done = true
	}
	if len(tl.held) > 0 {
		tl.gapSince = time.Now() // any gap left is a new one
	}
	return env
}

// skipGap gives up on the missing seqs before the lowest held one.
func (tl *Tail) skipGap() {
	lowest := uint64(0)
	for seq := range tl.held {
		if lowest == 0 || seq < lowest {
			lowest = seq
		}
	}
	tl.t.cfg.Logger.Warn("bus: skipping missing events", "run_id", tl.runID, "from", tl.want, "to", lowest-1)
	tl.want = lowest
}

// All iterates the tail's events until io.EOF (not yielded), an error
// (yielded last) or the consumer stops early. It does not close the tail.
func (tl *Tail) All(ctx context.Context) iter.Seq2[*Envelope, error] {
	return func(yield func(*Envelope, error) bool) {
		for {
			env, err := tl.Next(ctx)
			if errors.Is(err, io.EOF) {
				return
			}
			if !yield(env, err) || err != nil {
				return
			}
		}
	}
}

// Close stops the tail and deletes its consumer, waiting at most the
// configured Timeout when ctx has no deadline. Closing twice is a no-op.
func (tl *Tail) Close(ctx context.Context) error {
	var err error
	tl.closeOnce.Do(func() {
		close(tl.closed)
		tl.it.Stop()
		err = tl.t.deleteConsumer(ctx, tl.stream, tl.cons)
		if err != nil {
			err = fmt.Errorf("bus: close tail of run %s: %w", tl.runID, err)
		}
	})
	return err
}

// deleteConsumer deletes a tail's consumer so it stops counting against the
// stream's consumer limit at once.
func (t *Tailer) deleteConsumer(ctx context.Context, stream string, cons jetstream.Consumer) error {
	info := cons.CachedInfo()
	if info == nil {
		return nil
	}
	ctx, cancel := withDefaultTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	err := t.js.DeleteConsumer(ctx, stream, info.Name)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("delete consumer %s: %w", info.Name, err)
	}
	return nil
}
