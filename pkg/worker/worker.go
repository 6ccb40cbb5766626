package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// Worker claims and executes runs. Build it with New; Start and Stop it
// once each.
type Worker struct {
	cfg    Config
	log    *slog.Logger
	names  bus.Names
	m      *metrics
	runner *loop.Runner

	js     jetstream.JetStream
	st     *store.Store
	pub    *bus.Publisher
	cons   jetstream.Consumer
	ctlSub *nats.Subscription

	presenceSub *nats.Subscription
	deadCtx     context.Context
	stopDead    context.CancelFunc
	deadDone    chan struct{}
	runsStream  jetstream.Stream
	reaperCtx   context.Context
	stopReaper  context.CancelFunc
	reaperDone  chan struct{}
	timersDone  chan struct{}

	mu      sync.Mutex
	started bool
	stopped bool
	active  map[string]*activeRun // by run id
	slots   chan struct{}

	claimCtx    context.Context
	stopClaim   context.CancelFunc
	runCtx      context.Context
	interrupt   context.CancelCauseFunc
	claimDone   chan struct{}
	runs        sync.WaitGroup
	drained     chan struct{}
	drainedOnce sync.Once
}

// ErrShutdown is the cause given to runs interrupted by Stop.
var ErrShutdown = errors.New("worker shutting down: run released to another worker")

// New validates cfg and builds a Worker. It starts nothing.
func New(cfg Config) (*Worker, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	names, err := bus.NewNames(cfg.Prefix)
	if err != nil {
		return nil, fmt.Errorf("worker: Config.Prefix: %w", err)
	}
	m, err := newMetrics(cfg.Metrics)
	if err != nil {
		return nil, fmt.Errorf("worker: metrics: %w", err)
	}
	w := &Worker{
		cfg: cfg, names: names, m: m,
		log:    cfg.Logger.With("worker", cfg.ID),
		active: map[string]*activeRun{},
		slots:  make(chan struct{}, cfg.Concurrency),
	}
	w.runner = loop.NewRunner(loop.RunnerConfig{Registry: cfg.Registry, Logger: w.log, Now: cfg.Clock, ContextPolicy: cfg.ContextPolicy})
	return w, nil
}

// ID is the worker's id.
func (w *Worker) ID() string { return w.cfg.ID }

// Start provisions streams and buckets (unless SkipProvision), binds the
// stores and starts claiming runs. It returns once the worker is claiming.
func (w *Worker) Start(ctx context.Context) error {
	w.mu.Lock()
	if w.started {
		w.mu.Unlock()
		return errors.New("worker: Start called twice")
	}
	w.started = true
	w.mu.Unlock()

	js, err := jetstream.New(w.cfg.Conn)
	if err != nil {
		return fmt.Errorf("worker: jetstream: %w", err)
	}
	w.js = js
	if !w.cfg.SkipProvision {
		if _, err := bus.Provision(ctx, js, w.cfg.Provision); err != nil {
			return fmt.Errorf("worker: provision: %w", err)
		}
	}
	if w.st, err = store.Open(ctx, js, w.cfg.Store); err != nil {
		return fmt.Errorf("worker: open stores: %w", err)
	}
	if w.pub, err = bus.NewPublisher(js, bus.PublisherConfig{Prefix: w.cfg.Prefix, Clock: w.cfg.Clock, Logger: w.log}); err != nil {
		return fmt.Errorf("worker: publisher: %w", err)
	}
	events, err := js.Stream(ctx, w.names.EventsStream())
	if err != nil {
		return fmt.Errorf("worker: events stream %s: %w", w.names.EventsStream(), err)
	}
	w.warnLongApprovals(events.CachedInfo().Config.MaxAge)
	if w.cons, err = js.Consumer(ctx, w.names.RunsStream(), w.names.WorkersConsumer()); err != nil {
		return fmt.Errorf("worker: consumer %s on %s: %w (provision the streams first, or drop SkipProvision)", w.names.WorkersConsumer(), w.names.RunsStream(), err)
	}
	w.adoptAckWait()
	if w.ctlSub, err = w.cfg.Conn.Subscribe(w.names.Prefix()+".control.*", w.onControl); err != nil {
		return fmt.Errorf("worker: control subscription: %w", err)
	}
	if err := w.startDeadLetters(ctx); err != nil {
		return fmt.Errorf("worker: dead-letter subscription: %w", err)
	}
	w.reaperCtx, w.stopReaper = context.WithCancel(context.Background())
	if err := w.startTakeover(w.reaperCtx); err != nil {
		w.stopReaper()
		return fmt.Errorf("worker: takeover watcher: %w", err)
	}
	w.claimCtx, w.stopClaim = context.WithCancel(context.Background())
	w.runCtx, w.interrupt = context.WithCancelCause(context.Background())
	w.claimDone = make(chan struct{})
	w.drained = make(chan struct{})
	go w.claimLoop()
	w.log.Info("worker started", "concurrency", w.cfg.Concurrency, "ack_wait", w.cfg.AckWait)
	return nil
}

// warnLongApprovals warns about agents whose approval wait can outlast the
// events stream's max age: a run parked that long finds its earlier events
// expired (it continues its event sequence, but a tail from the start no
// longer sees how it began).
func (w *Worker) warnLongApprovals(maxAge time.Duration) {
	if maxAge <= 0 {
		return
	}
	for _, name := range w.cfg.Catalog.Names() {
		if ag, ok := w.cfg.Catalog.Get(name); ok && ag.ApprovalTimeout >= maxAge {
			w.log.Warn("an agent's approval timeout outlasts the events stream's max age: a run waiting that long loses its earlier events; shorten approval_timeout or raise the events max age",
				"agent", name, "approval_timeout", ag.ApprovalTimeout, "events_max_age", maxAge)
		}
	}
}

// adoptAckWait settles the claim's ack wait and heartbeat on the workers
// consumer's ack wait (and warns when the consumer caps the fleet below this
// worker's concurrency): an unset Config.AckWait takes it; a longer one
// (streams provisioned by someone else: SkipProvision, or another worker's
// Provision) yields to it, or every run longer than the consumer's ack wait
// would be redelivered while it runs.
func (w *Worker) adoptAckWait() {
	var have jetstream.ConsumerConfig
	if ci := w.cons.CachedInfo(); ci != nil {
		have = ci.Config
	}
	consumerWait := cmp.Or(have.AckWait, DefaultAckWait)
	switch {
	case w.cfg.AckWait == 0:
		w.cfg.AckWait = consumerWait
	case consumerWait < w.cfg.AckWait:
		w.log.Warn("the workers consumer's ack wait is shorter than Config.AckWait; heartbeating for it",
			"consumer_ack_wait", consumerWait, "config_ack_wait", w.cfg.AckWait)
		w.cfg.AckWait = consumerWait
	}
	if w.cfg.Heartbeat == 0 || w.cfg.Heartbeat > w.cfg.AckWait/2 {
		w.cfg.Heartbeat = w.cfg.AckWait / 3
	}
	if have.MaxAckPending > 0 && have.MaxAckPending < w.cfg.Concurrency {
		w.log.Warn("the whole fleet may claim fewer runs at once than this worker has slots; raise the workers consumer's MaxAckPending (lovia worker --max-ack-pending)",
			"max_ack_pending", have.MaxAckPending, "concurrency", w.cfg.Concurrency)
	}
}

// Stop stops claiming, lets running runs finish within ShutdownGrace (or
// until ctx ends), then interrupts the rest at a checkpoint and releases
// them for another worker. It waits for every run goroutine to return.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	if !w.started || w.stopped {
		w.mu.Unlock()
		return nil
	}
	w.stopped = true
	w.mu.Unlock()
	w.stopClaim()
	<-w.claimDone
	if w.ctlSub != nil {
		_ = w.ctlSub.Unsubscribe()
	}
	done := make(chan struct{})
	go func() { w.runs.Wait(); close(done) }()
	grace := time.NewTimer(w.cfg.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		w.log.Info("shutdown grace over; interrupting runs at a checkpoint")
		w.interrupt(ErrShutdown)
	case <-ctx.Done():
		w.interrupt(ErrShutdown)
	}
	select {
	case <-done:
	case <-ctx.Done():
		<-done
	}
	w.interrupt(ErrShutdown)
	if w.presenceSub != nil {
		_ = w.presenceSub.Unsubscribe()
	}
	if w.stopDead != nil {
		w.stopDead()
		<-w.deadDone
	}
	w.stopReaper()
	if w.timersDone != nil {
		<-w.timersDone
	}
	if w.reaperDone != nil {
		<-w.reaperDone
	}
	w.log.Info("worker stopped")
	return nil
}

// claimLoop fetches runs while there are free slots.
func (w *Worker) claimLoop() {
	defer close(w.claimDone)
	for {
		// Wait for at least one free slot.
		select {
		case w.slots <- struct{}{}:
		case <-w.claimCtx.Done():
			return
		}
		free := 1 + w.cfg.Concurrency - len(w.slots)
		if free > 1 {
			free = min(free, 64)
		}
		fctx, fcancel := context.WithTimeout(w.claimCtx, 2*time.Second)
		batch, err := w.cons.Fetch(free, jetstream.FetchContext(fctx))
		if err != nil {
			fcancel()
			<-w.slots
			if w.claimCtx.Err() != nil {
				return
			}
			w.log.Warn("claim: fetch failed; retrying", "error", err)
			select {
			case <-time.After(500 * time.Millisecond):
			case <-w.claimCtx.Done():
				return
			}
			continue
		}
		n := 0
		for msg := range batch.Messages() {
			if n > 0 {
				// The first message uses the slot taken above.
				select {
				case w.slots <- struct{}{}:
				case <-w.claimCtx.Done():
					_ = msg.Nak()
					continue
				}
			}
			n++
			w.runs.Add(1)
			go func(msg jetstream.Msg) {
				defer func() { <-w.slots; w.runs.Done() }()
				w.handle(msg)
			}(msg)
		}
		fcancel()
		if n == 0 {
			<-w.slots
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && w.claimCtx.Err() == nil {
			w.log.Debug("claim: fetch ended", "error", err)
		}
	}
}
