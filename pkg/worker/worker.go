package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lovia-fleet/lovia/internal/gopool"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/fleet"
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
	trace  workerTracing // trace.go

	js     jetstream.JetStream
	st     *store.Store
	pub    *bus.Publisher
	cons   map[string]jetstream.Consumer // by agent (bound at Start, before the loops)
	ctlSub *nats.Subscription
	fleet  *fleet.Registry
	ann    *fleet.Announcer

	presenceSub *nats.Subscription
	hold        *holdings // takeover.go, holdings.go
	deadCtx     context.Context
	stopDead    context.CancelFunc
	deadDone    chan struct{}
	runsStream  jetstream.Stream
	reaperCtx   context.Context
	stopReaper  context.CancelFunc
	reaperDone  chan struct{}
	timersDone  chan struct{}
	sweepDone   chan struct{}

	mu      sync.Mutex
	started bool
	stopped bool
	active  map[string]*activeRun // by run id
	slots   *slotPool             // slots.go

	claimCtx    context.Context
	stopClaim   context.CancelFunc
	claimMu     sync.Mutex
	fastClaims  bool                          // see claim
	freshCkpt   bool                          // a run never claimed has no checkpoint to read (see noSnapshot)
	loops       atomic.Int32                  // claim loops running
	claimStops  map[string]context.CancelFunc // by agent: ends its claim loop
	lease       fleet.Lease                   // of its id (identity.go), while Start runs
	instance    string                        // the lease's Instance: this process's, set before the reaper starts
	leaseRev    atomic.Uint64                 // the lease's revision while held, else 0
	predecessor bool                          // the lease was taken over from a dead process
	draining    map[string]bool               // agents removed from the registry whose runs in flight it still claims
	followDone  chan struct{}
	started0    time.Time
	runCtx      context.Context
	interrupt   context.CancelCauseFunc
	claimers    sync.WaitGroup
	runs        sync.WaitGroup
	pool        *gopool.Pool // the runs' goroutines, kept between runs
	beats       *heartbeats  // heartbeats.go
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
		slots:  newSlotPool(cfg.Concurrency),
		pool:   gopool.New(runGoroutineIdle),
	}
	w.trace = newWorkerTracing(cfg.Tracing)
	w.runner = loop.NewRunner(loop.RunnerConfig{Registry: cfg.Registry, Logger: w.log, Now: cfg.Clock, ContextPolicy: cfg.ContextPolicy, Tracer: w.trace.loop})
	return w, nil
}

// ID is the worker's id.
func (w *Worker) ID() string { return w.cfg.ID }

// Start provisions streams and buckets (unless SkipProvision), binds the
// stores, creates the consumers of the agents it serves, announces itself
// to the fleet and starts claiming runs. It returns once the worker is
// claiming. A Start that fails leaves nothing running: Stop after it is
// safe, and does nothing more.
func (w *Worker) Start(ctx context.Context) (err error) {
	w.mu.Lock()
	if w.started {
		w.mu.Unlock()
		return errors.New("worker: Start called twice")
	}
	w.started = true
	w.mu.Unlock()
	defer func() {
		if err != nil {
			w.teardown(context.WithoutCancel(ctx))
		}
	}()
	w.claimCtx, w.stopClaim = context.WithCancel(context.Background())
	w.runCtx, w.interrupt = context.WithCancelCause(context.Background())
	w.reaperCtx, w.stopReaper = context.WithCancel(context.Background())

	js, err := jetstream.New(w.cfg.Conn)
	if err != nil {
		return fmt.Errorf("worker: jetstream: %w", err)
	}
	w.js = js
	w.started0 = w.cfg.Clock().UTC()
	agents := w.served()
	if !w.cfg.SkipProvision {
		if _, err := bus.Provision(ctx, js, w.cfg.Provision); err != nil {
			return fmt.Errorf("worker: provision: %w", err)
		}
	}
	// The consumers of this worker's agents: created when missing even
	// with SkipProvision (a new agent joins the fleet with its first
	// worker), updated to the fleet-wide settings only without it.
	if err := bus.ProvisionAgents(ctx, js, w.cfg.Provision, agents, w.cfg.SkipProvision); err != nil {
		return fmt.Errorf("worker: provision the consumers of its agents: %w", err)
	}
	if w.st, err = store.Open(ctx, js, w.cfg.Store); err != nil {
		return fmt.Errorf("worker: open stores: %w", err)
	}
	if w.pub, err = bus.NewPublisher(js, bus.PublisherConfig{Prefix: w.cfg.Prefix, Clock: w.cfg.Clock, Logger: w.log, OutageBudget: w.cfg.Store.OutageBudget}); err != nil {
		return fmt.Errorf("worker: publisher: %w", err)
	}
	var events jetstream.Stream
	err = store.WaitFor(ctx, js, w.log, "look up the events stream", func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, w.cfg.StoreTimeout)
		defer cancel()
		var err error
		events, err = js.Stream(cctx, w.names.EventsStream())
		return err
	})
	if err != nil {
		return fmt.Errorf("worker: events stream %s: %w", w.names.EventsStream(), err)
	}
	w.warnLongApprovals(events.CachedInfo().Config.MaxAge)
	// Claims of runs never claimed skip reading their (absent) checkpoint
	// and events, unless run records can expire before events do (a run
	// id indexed anew could then have an earlier incarnation's events).
	if rs, err := js.Stream(ctx, bus.KVStream(w.cfg.Store.RunBucket)); err == nil {
		runsAge, eventsAge := rs.CachedInfo().Config.MaxAge, events.CachedInfo().Config.MaxAge
		w.fastClaims = runsAge == 0 || (eventsAge != 0 && runsAge >= eventsAge)
		// Nor their checkpoint, unless run records can expire before
		// checkpoints do.
		if cs, err := js.Stream(ctx, bus.KVStream(w.cfg.Store.CheckpointBucket)); err == nil {
			ckptAge := cs.CachedInfo().Config.MaxAge
			w.freshCkpt = runsAge == 0 || (ckptAge != 0 && runsAge >= ckptAge)
		}
	}
	w.cons, w.claimStops, w.draining = map[string]jetstream.Consumer{}, map[string]context.CancelFunc{}, map[string]bool{}
	for _, agent := range agents {
		name, err := w.names.AgentConsumer(agent)
		if err != nil {
			return fmt.Errorf("worker: agent %q: %w", agent, err)
		}
		var c jetstream.Consumer
		err = store.WaitFor(ctx, js, w.log, "look up consumer "+name, func(ctx context.Context) error {
			cctx, cancel := context.WithTimeout(ctx, w.cfg.StoreTimeout)
			defer cancel()
			var err error
			c, err = js.Consumer(cctx, w.names.RunsStream(), name)
			return err
		})
		if err != nil {
			return fmt.Errorf("worker: consumer %s on %s: %w (provision the streams first, or drop SkipProvision)", name, w.names.RunsStream(), err)
		}
		w.cons[agent] = c
	}
	w.adoptAckWait()
	w.beats = newHeartbeats(w) // at the adopted interval
	w.beats.start()
	if w.ctlSub, err = w.cfg.Conn.Subscribe(w.names.ControlWildcard(), w.onControl); err != nil {
		return fmt.Errorf("worker: control subscription: %w", err)
	}
	if err := w.startDeadLetters(ctx); err != nil {
		return fmt.Errorf("worker: dead-letter subscription: %w", err)
	}
	if w.fleet, err = fleet.Ensure(ctx, js, w.names, w.cfg.Provision.Replicas); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	if err := w.claimID(ctx); err != nil {
		return err
	}
	if err := w.startTakeover(w.reaperCtx); err != nil {
		return fmt.Errorf("worker: takeover watcher: %w", err)
	}
	if err := w.confirmID(ctx); err != nil {
		return err
	}
	w.releasePredecessor(ctx)
	w.sweepDone = make(chan struct{})
	go w.sweep(w.reaperCtx)
	w.ann = fleet.NewAnnouncer(w.fleet, w.member(), w.cfg.AnnounceInterval, w.log)
	w.ann.Live(func(m *fleet.Member) { m.InFlight = w.inFlight() })
	if err := w.ann.Start(ctx); err != nil {
		return fmt.Errorf("worker: announce to the fleet: %w", err)
	}
	w.claimMu.Lock()
	for agent, c := range w.cons {
		w.startClaimer(agent, c)
	}
	w.claimMu.Unlock()
	if w.cfg.Agents != nil {
		w.ann.Update(w.member()) // now that its claim loops run
		w.followDone = make(chan struct{})
		go w.followAgents(w.claimCtx)
	}
	w.m.info.WithLabelValues(w.cfg.ID, buildVersion(), strings.Join(agents, ",")).Set(1)
	w.log.Info("worker started", "concurrency", w.cfg.Concurrency, "ack_wait", w.cfg.AckWait, "agents", agents)
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
	cat, _ := w.agents()
	for _, name := range cat.Names() {
		if ag, ok := cat.Get(name); ok && ag.ApprovalTimeout >= maxAge {
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
	for _, c := range w.cons {
		if ci := c.CachedInfo(); ci != nil {
			have = ci.Config
		}
		break
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
// them for another worker. It waits for every goroutine the worker
// started. It is safe after a failed Start, and more than once.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	if !w.started || w.stopped {
		w.mu.Unlock()
		return nil
	}
	w.stopped = true
	w.mu.Unlock()
	if w.ann != nil {
		// Out of the fleet first: the API no longer counts this worker.
		if err := w.ann.Stop(ctx); err != nil {
			w.log.Warn("withdrawing from the fleet registry failed; the announcement expires by itself", "error", err)
		}
	}
	w.stopClaim()
	if w.followDone != nil {
		<-w.followDone
	}
	w.claimers.Wait()
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
	<-done
	w.teardown(ctx)
	w.m.info.DeletePartialMatch(prometheus.Labels{"worker": w.cfg.ID})
	w.log.Info("worker stopped")
	return nil
}

// teardown stops what Start started besides the claim loops and runs:
// the presence responder, the dead-letter loop, the reaper and park
// timers, the control subscription and the announcer. Each part is
// stopped only if it was started.
func (w *Worker) teardown(ctx context.Context) {
	defer w.pool.Close()
	defer w.beats.stop()
	if w.interrupt != nil {
		w.interrupt(ErrShutdown)
	}
	if w.stopClaim != nil {
		w.stopClaim()
	}
	if w.ann != nil {
		_ = w.ann.Stop(ctx)
	}
	if w.ctlSub != nil {
		_ = w.ctlSub.Unsubscribe()
	}
	if w.presenceSub != nil {
		_ = w.presenceSub.Unsubscribe()
	}
	if w.fleet != nil {
		w.releaseID(ctx)
	}
	if w.stopDead != nil {
		w.stopDead()
		<-w.deadDone
	}
	if w.stopReaper != nil {
		w.stopReaper()
	}
	if w.timersDone != nil {
		<-w.timersDone
	}
	if w.sweepDone != nil {
		<-w.sweepDone
	}
	if w.reaperDone != nil {
		<-w.reaperDone
	}
}

// runGoroutineIdle is how long a run's goroutine waits for the next run
// before it ends (see gopool).
const runGoroutineIdle = 10 * time.Second

// claimLoop fetches runs of one agent from its consumer into the worker's
// slots, which its agents share. While the agent is idle the loop waits for
// its next requests with a long poll that holds no slot (claimNext): an
// idle agent never keeps a slot from a busy one (before, each agent's long
// poll held its share of the slots, and with fewer slots than agents a run
// waited for the others' polls to expire, FetchTimeout each). Once a
// delivery says more requests are pending, the loop reserves slots for
// them and takes what is there (claimBacklog).
func (w *Worker) claimLoop(ctx context.Context, agent string, cons jetstream.Consumer) {
	defer w.claimers.Done()
	w.loops.Add(1)
	defer w.loops.Add(-1)
	var pending uint64
	for ctx.Err() == nil {
		var err error
		if pending > 0 {
			pending, err = w.claimBacklog(ctx, agent, cons, pending)
		} else {
			pending, err = w.claimNext(ctx, agent, cons)
		}
		if err != nil && ctx.Err() == nil {
			w.log.Warn("claim: fetch failed; retrying", "agent", agent, "error", err)
			select {
			case <-time.After(w.cfg.FetchRetry):
			case <-ctx.Done():
			}
		}
	}
}

// lookWait bounds a fetch for requests known to be there: the backlog's,
// and a full worker's look at an idle agent. The server answers at once
// with what it has; it holds a fetch that finds the agent's consumer at its
// max ack pending until the wait ends.
const lookWait = 50 * time.Millisecond

// claimNext waits for the agent's next requests. While a slot is free it
// long-polls, without holding a slot, for its share of the free ones: each
// request takes a slot as it arrives, or waits for the next one
// (holdForSlot). While none has been free for FetchTimeout — the worker is
// busy with other runs — it looks as for a backlog of one (claimBacklog:
// in line for a slot, then a fetch of lookWait), so that a busy worker
// serves every agent in turn and sends no long polls. It returns the
// requests still pending after the last one it took.
func (w *Worker) claimNext(ctx context.Context, agent string, cons jetstream.Consumer) (uint64, error) {
	t := time.NewTimer(w.cfg.FetchTimeout)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return 0, nil
	case <-t.C:
		return w.claimBacklog(ctx, agent, cons, 1)
	case <-w.slots.roomFree():
	}
	// Each idle loop asks for its share of the free slots, so that all of
	// them together ask for about as many requests as there are slots to
	// run them.
	n := max(1, min(w.share(), w.slots.available()/max(1, int(w.loops.Load()))))
	fctx, cancel := context.WithTimeout(ctx, w.cfg.FetchTimeout)
	defer cancel()
	batch, err := cons.Fetch(n, jetstream.FetchContext(fctx))
	if err != nil {
		return 0, err
	}
	var pending uint64
	for msg := range batch.Messages() {
		pending = pendingAfter(msg)
		if w.slots.tryAcquire() {
			w.dispatch(msg)
		} else {
			w.holdForSlot(ctx, msg)
		}
	}
	return pending, w.fetchEnded(ctx, agent, batch)
}

// share is a claim loop's fair share of the slots: at most 64 a fetch.
func (w *Worker) share() int {
	return min(64, max(1, w.cfg.Concurrency/max(1, int(w.loops.Load()))))
}

// claimBacklog reserves slots for the agent's pending requests — one,
// waiting for it in line, then as many as are free up to the pending count
// and the agent's fair share — and takes them (lookWait). It returns the
// requests still pending after the last one it took.
func (w *Worker) claimBacklog(ctx context.Context, agent string, cons jetstream.Consumer, pending uint64) (uint64, error) {
	want := min(w.share(), int(min(pending, 64)))
	if w.slots.acquire(ctx, false) != nil {
		return 0, nil
	}
	reserved := 1
	for reserved < want && w.slots.tryAcquire() {
		reserved++
	}
	if ctx.Err() != nil { // acquire takes a free slot without looking at ctx
		w.unreserve(reserved)
		return 0, nil
	}
	batch, err := cons.Fetch(reserved, jetstream.FetchMaxWait(lookWait))
	if err != nil {
		w.unreserve(reserved)
		return 0, err
	}
	n := 0
	pending = 0
	for msg := range batch.Messages() {
		if n == reserved { // never: the fetch asked for reserved
			_ = msg.Nak()
			continue
		}
		n++
		pending = pendingAfter(msg)
		w.dispatch(msg)
	}
	w.unreserve(reserved - n)
	return pending, w.fetchEnded(ctx, agent, batch)
}

// dispatch executes a fetched request in the slot it holds.
func (w *Worker) dispatch(msg jetstream.Msg) {
	w.runs.Add(1)
	w.pool.Go(func() {
		defer func() { w.slots.release(); w.runs.Done() }()
		w.handle(msg)
	})
}

func (w *Worker) unreserve(n int) {
	for range n {
		w.slots.release()
	}
}

// holdForSlot keeps a request fetched while no slot was free until one is
// (first in line: before the claim loops) and then executes it; its claim
// is kept alive by progress acks meanwhile, and once more as it starts.
// When ctx ends first the request is given back (nak) for another worker.
func (w *Worker) holdForSlot(ctx context.Context, msg jetstream.Msg) {
	w.runs.Add(1)
	w.m.held.Inc()
	go func() {
		defer w.runs.Done()
		defer w.m.held.Dec()
		got := make(chan error, 1)
		go func() { got <- w.slots.acquire(ctx, true) }()
		beat := time.NewTicker(w.cfg.Heartbeat)
		defer beat.Stop()
		for {
			select {
			case err := <-got:
				switch {
				case err != nil:
					_ = msg.Nak()
				case ctx.Err() != nil:
					w.slots.release()
					_ = msg.Nak()
				default:
					// Its execution's first beat is a heartbeat away.
					_ = msg.InProgress()
					w.dispatch(msg)
				}
				return
			case <-beat.C:
				_ = msg.InProgress()
			}
		}
	}()
}

// pendingAfter is how many requests the agent's consumer had pending after
// msg when it was delivered.
func pendingAfter(msg jetstream.Msg) uint64 {
	meta, err := msg.Metadata()
	if err != nil {
		return 0
	}
	return meta.NumPending
}

// fetchEnded returns the error a fetch ended with, unless it ended the
// usual way (its wait over, no requests, or the loop stopping): the loop
// then waits before it fetches again.
func (w *Worker) fetchEnded(ctx context.Context, agent string, batch jetstream.MessageBatch) error {
	err := batch.Error()
	if err == nil || errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoMessages) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("fetching %s's requests: %w", agent, err)
}
