package bus

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStreamPublisher publishes messages to JetStream streams on a core NATS
// connection and reads their acks itself: one wildcard reply subscription,
// a map from reply token to the publish awaiting its ack, and a
// hand-written parser of the server's ack (what it does not recognise goes
// to encoding/json). A publish returns what jetstream.PublishMsg returns
// for the same reply: the ack, an error that matches the same jetstream
// sentinels and API errors, jetstream.ErrNoStreamResponse when no stream
// binds the subject.
//
// Make one with [NewJetStreamPublisher] and share it among the users of
// a connection. Its reply subscription and the goroutine that watches the
// connection (a reconnect
// fails the asynchronous publishes awaiting acks with
// nats.ErrDisconnected, as nats.go's async publisher does) are made on the
// first publish and end when the connection closes. It is safe for
// concurrent use.
type JetStreamPublisher struct {
	nc *nats.Conn

	mu      sync.Mutex
	prefix  string // the reply subjects' prefix, "_INBOX.<nuid>."; set once
	sub     *nats.Subscription
	acks    map[uint64]*ackWait
	next    uint64 // the last reply token used
	async   int    // the asynchronous waits in acks
	stall   chan struct{}
	closed  bool
	names   nameCache
	started bool
}

// maxAsyncPending bounds the asynchronous publishes of a connection
// awaiting acks, as nats.go's async publisher does by default: past it a
// publish waits (the stall wait) for one to settle.
const maxAsyncPending = 4000

// Sync publishes retry no responders as jetstream.PublishMsg does by
// default: 2 more attempts, 250ms apart (see [PublishRetries]).
const (
	defaultNoResponderRetries = jetstream.DefaultPubRetryAttempts
	defaultNoResponderWait    = jetstream.DefaultPubRetryWait
	// defaultSyncTimeout bounds a sync publish whose context has no
	// deadline, as the jetstream package's default timeout does.
	defaultSyncTimeout = 5 * time.Second
)

// NewJetStreamPublisher returns a publisher on nc. It subscribes on its
// first publish.
func NewJetStreamPublisher(nc *nats.Conn) *JetStreamPublisher {
	return &JetStreamPublisher{nc: nc}
}

// ackWait is one publish awaiting its ack. The reply handler (or the
// connection watcher) fills ack and err, then sets done and signals
// notify; whoever waits reads them once done is set.
type ackWait struct {
	id     uint64
	notify chan struct{} // capacity 1; may be shared by several waits
	sync   bool          // a sync publish: a reconnect does not fail it
	done   atomic.Bool
	ack    jetstream.PubAck
	err    error
	timer  *time.Timer // a sync wait's, for its deadline (see arm)
}

// settled reports whether the wait has its outcome.
func (w *ackWait) settled() bool { return w.done.Load() }

// resolve sets the outcome and wakes the waiter. p.mu held.
func (w *ackWait) resolve(ack jetstream.PubAck, err error) {
	w.ack, w.err = ack, err
	w.done.Store(true)
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// start makes the reply subscription and the connection watcher. p.mu
// held.
func (p *JetStreamPublisher) start() error {
	if p.closed || p.nc.IsClosed() {
		return nats.ErrConnectionClosed
	}
	if p.started {
		return nil
	}
	// prefix is set before the handler can run (it reads it unlocked).
	p.prefix = p.nc.NewInbox() + "."
	p.acks = make(map[uint64]*ackWait)
	sub, err := p.nc.Subscribe(p.prefix+"*", p.handle)
	if err != nil {
		return err
	}
	p.sub, p.started = sub, true
	status := p.nc.StatusChanged(nats.RECONNECTING, nats.CLOSED)
	if p.nc.IsClosed() {
		// Closed before the listener was registered: no CLOSED will come,
		// and nothing waits yet (the caller registers after start).
		p.nc.RemoveStatusListener(status)
		p.closed = true
		return nats.ErrConnectionClosed
	}
	go p.watch(status)
	return nil
}

// watch fails the publishes awaiting acks when the connection reconnects
// (their acks may be lost) or closes.
func (p *JetStreamPublisher) watch(status chan nats.Status) {
	for s := range status {
		if s == nats.CLOSED || p.nc.IsClosed() {
			break
		}
		p.failPending(nats.ErrDisconnected, false)
	}
	p.nc.RemoveStatusListener(status)
	p.failPending(nats.ErrConnectionClosed, true)
}

// failPending settles the asynchronous waits (every wait, with all) with
// err.
func (p *JetStreamPublisher) failPending(err error, all bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if all {
		p.closed = true
	}
	for id, w := range p.acks {
		if w.sync && !all {
			continue
		}
		p.drop(id, w)
		w.resolve(jetstream.PubAck{}, err)
	}
}

// drop removes a wait from acks. p.mu held.
func (p *JetStreamPublisher) drop(id uint64, w *ackWait) {
	delete(p.acks, id)
	if !w.sync {
		p.async--
		if p.stall != nil && p.async < maxAsyncPending {
			close(p.stall)
			p.stall = nil
		}
	}
}

// handle settles the wait a reply is for.
func (p *JetStreamPublisher) handle(m *nats.Msg) {
	if len(m.Subject) <= len(p.prefix) {
		return
	}
	id, err := strconv.ParseUint(m.Subject[len(p.prefix):], 36, 64)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.acks[id]
	if w == nil {
		return // forgotten: timed out, or failed by a reconnect
	}
	p.drop(id, w)
	if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
		w.resolve(jetstream.PubAck{}, nats.ErrNoResponders)
		return
	}
	r, err := parseAck(m.Data, &p.names)
	if err == nil {
		err = r.err(w.sync)
	}
	w.resolve(r.ack, err)
}

// register gives w a reply token and puts it in acks, waiting up to
// stallWait first while maxAsyncPending asynchronous waits are there
// (jetstream.ErrTooManyStalledMsgs after). It returns the reply subject.
func (p *JetStreamPublisher) register(w *ackWait, stallWait time.Duration) (string, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	p.mu.Lock()
	for {
		if err := p.start(); err != nil {
			p.mu.Unlock()
			return "", err
		}
		if w.sync || p.async < maxAsyncPending {
			break
		}
		if p.stall == nil {
			p.stall = make(chan struct{})
		}
		stall := p.stall
		p.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(stallWait)
		}
		select {
		case <-stall:
		case <-timer.C:
			return "", jetstream.ErrTooManyStalledMsgs
		}
		p.mu.Lock()
	}
	p.next++
	w.id = p.next
	w.done.Store(false)
	w.ack, w.err = jetstream.PubAck{}, nil
	p.acks[w.id] = w
	if !w.sync {
		p.async++
	}
	var buf [96]byte
	reply := string(strconv.AppendUint(append(buf[:0], p.prefix...), w.id, 36))
	p.mu.Unlock()
	return reply, nil
}

// forget removes w from acks if it is still there (its ack will be
// ignored). Once it returns, nothing else touches w.
func (p *JetStreamPublisher) forget(w *ackWait) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.acks[w.id] == w {
		p.drop(w.id, w)
	}
}

// send publishes m with the reply subject reply.
func (p *JetStreamPublisher) send(m *nats.Msg, reply string) error {
	return p.nc.PublishMsg(&nats.Msg{Subject: m.Subject, Reply: reply, Header: m.Header, Data: m.Data})
}

// publishAsync publishes m (whose Reply must be empty; it is set for the
// publish and cleared after, so m must not be in use elsewhere meanwhile)
// and registers w, whose notify is signalled when its outcome is in. It
// waits up to stallWait while too many publishes of the connection await
// acks. No ack is awaited past a reconnect (the wait fails with
// nats.ErrDisconnected); the caller bounds the wait for the ack and calls
// forget when it gives up.
func (p *JetStreamPublisher) publishAsync(m *nats.Msg, w *ackWait, stallWait time.Duration) error {
	w.sync = false
	reply, err := p.register(w, stallWait)
	if err != nil {
		return err
	}
	// m itself goes out with the reply subject: a copy would escape.
	m.Reply = reply
	err = p.nc.PublishMsg(m)
	m.Reply = ""
	if err != nil {
		p.forget(w)
		return err
	}
	return nil
}

// asyncErr is the error of a settled asynchronous wait as
// jetstream.PublishMsgAsync reports it.
func asyncErr(err error) error {
	if errors.Is(err, nats.ErrNoResponders) {
		return jetstream.ErrNoStreamResponse
	}
	return err
}

// PublishOpt is an option of [JetStreamPublisher.PublishMsg].
type PublishOpt func(*publishOpts)

type publishOpts struct {
	retries int
	wait    time.Duration
}

// PublishRetries sets how many more times a sync publish is sent when no
// stream answers (no responders), wait apart: jetstream.PublishMsg's
// defaults (2, 250ms) unless set. 0 sends once.
func PublishRetries(n int, wait time.Duration) PublishOpt {
	return func(o *publishOpts) { o.retries, o.wait = n, wait }
}

// applyPublishOpts returns o with opts applied.
func applyPublishOpts(o publishOpts, opts []PublishOpt) publishOpts {
	p := &o
	for _, opt := range opts {
		opt(p)
	}
	return *p
}

var syncWaits = sync.Pool{New: func() any { return &ackWait{notify: make(chan struct{}, 1), sync: true} }}

// PublishMsg publishes m (whose Reply must be empty; m is not changed) to
// the stream that binds its subject and waits for the ack, within ctx (5s
// when ctx has no deadline). Headers such as the expected last sequence
// are the caller's to set on m. It returns the ack, or what
// jetstream.PublishMsg returns for the same reply: the stream's
// *jetstream.APIError (wrapped; it matches jetstream.ErrKeyExists for a
// wrong last sequence and so on, as the library's does),
// jetstream.ErrNoStreamResponse after the no-responder retries,
// jetstream.ErrInvalidJSAck, nats.ErrConnectionClosed, or ctx's error.
func (p *JetStreamPublisher) PublishMsg(ctx context.Context, m *nats.Msg, opts ...PublishOpt) (jetstream.PubAck, error) {
	var within time.Duration
	if _, ok := ctx.Deadline(); !ok {
		within = defaultSyncTimeout
	}
	return p.publishMsg(ctx, m, within, opts)
}

// PublishMsgWithin is PublishMsg waiting at most d (its no-responder
// retries included) besides ctx, as under a context with that timeout —
// it then fails with context.DeadlineExceeded — without making one: no
// context, timer or cancellation link per publish (a pooled timer bounds
// the wait). d <= 0 is PublishMsg.
func (p *JetStreamPublisher) PublishMsgWithin(ctx context.Context, m *nats.Msg, d time.Duration, opts ...PublishOpt) (jetstream.PubAck, error) {
	if d <= 0 {
		return p.PublishMsg(ctx, m, opts...)
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
		d = 0 // ctx ends first
	}
	return p.publishMsg(ctx, m, d, opts)
}

// publishMsg is PublishMsg bounded by ctx and, when within > 0, by within
// from now.
func (p *JetStreamPublisher) publishMsg(ctx context.Context, m *nats.Msg, within time.Duration, opts []PublishOpt) (jetstream.PubAck, error) {
	o := publishOpts{retries: defaultNoResponderRetries, wait: defaultNoResponderWait}
	if len(opts) > 0 {
		o = applyPublishOpts(o, opts) // only then does an option see (and escape) them
	}
	var deadline time.Time
	if within > 0 {
		deadline = time.Now().Add(within)
	}
	w := syncWaits.Get().(*ackWait)
	defer func() {
		p.forget(w)
		select {
		case <-w.notify:
		default:
		}
		syncWaits.Put(w)
	}()
	for attempt := 0; ; attempt++ {
		ack, err := p.request(ctx, m, w, deadline)
		if !errors.Is(err, nats.ErrNoResponders) {
			return ack, err
		}
		if attempt >= o.retries && o.retries >= 0 {
			return jetstream.PubAck{}, jetstream.ErrNoStreamResponse
		}
		wait := o.wait
		if !deadline.IsZero() {
			wait = min(wait, time.Until(deadline))
		}
		t := w.arm(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// arm returns the wait's timer (a sync wait's, kept with it in the pool)
// set to fire after d. The caller stops it.
func (w *ackWait) arm(d time.Duration) *time.Timer { return rearm(&w.timer, d) }

// rearm sets the timer *t to fire after d, making it on first use, and
// returns it: a timer kept for reuse (stopped by its user after each
// wait; since Go 1.23 a Reset leaves no stale tick in its channel).
func rearm(t **time.Timer, d time.Duration) *time.Timer {
	if *t == nil {
		*t = time.NewTimer(d)
	} else {
		(*t).Reset(d)
	}
	return *t
}

// request sends m once and waits for its reply on w, until ctx ends or
// deadline (unless zero) passes.
func (p *JetStreamPublisher) request(ctx context.Context, m *nats.Msg, w *ackWait, deadline time.Time) (jetstream.PubAck, error) {
	if err := ctx.Err(); err != nil {
		return jetstream.PubAck{}, err
	}
	var expired <-chan time.Time
	if !deadline.IsZero() {
		d := time.Until(deadline)
		if d <= 0 {
			return jetstream.PubAck{}, context.DeadlineExceeded
		}
		t := w.arm(d)
		defer t.Stop()
		expired = t.C
	}
	reply, err := p.register(w, 0)
	if err != nil {
		return jetstream.PubAck{}, err
	}
	if err := p.send(m, reply); err != nil {
		p.forget(w)
		return jetstream.PubAck{}, err
	}
	for {
		select {
		case <-w.notify:
		case <-ctx.Done():
			return p.gaveUp(w, ctx.Err())
		case <-expired:
			return p.gaveUp(w, context.DeadlineExceeded)
		}
		if w.settled() {
			return w.ack, w.err
		}
	}
}

// gaveUp forgets w, whose wait ended with err, and returns its outcome
// if it came in meanwhile, else err.
func (p *JetStreamPublisher) gaveUp(w *ackWait, err error) (jetstream.PubAck, error) {
	p.forget(w)
	if w.settled() {
		return w.ack, w.err
	}
	return jetstream.PubAck{}, err
}
