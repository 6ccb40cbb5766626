package runindex

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lovia-fleet/lovia/internal/background"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// FeedConfig configures a Feed.
type FeedConfig struct {
	// Runs is the run index bucket to watch. Required.
	Runs *store.Runs
	// Conn, when set, is the connection the bucket is read on: the feed
	// loads the index again after it reconnects (a watch's consumer may
	// not survive a server restart, and the client library takes tens of
	// seconds to notice). It is polled, not hooked: the connection's
	// handlers stay the application's.
	Conn *nats.Conn
	// Retry is how long the feed waits before watching again after the
	// watch failed or ended. Default 1s.
	Retry time.Duration
	// MaxRuns caps the ended runs the index holds in memory (see NewBounded):
	// past it the oldest ended runs leave it, and Lookup reads them from
	// the bucket. Default DefaultMaxRuns; negative: no cap.
	MaxRuns int
	// Logger receives the build time and watch failures. Default: discard.
	Logger *slog.Logger
}

// Feed keeps an [Index] of every run live: it replays the run index
// bucket into a new index, serves it once caught up, and applies every
// change after. It writes nothing. When its watch ends (the bucket's
// stream was lost, the connection closed), it builds a new index the same
// way and serves the old one until the new one has caught up.
type Feed struct {
	cfg   FeedConfig
	cur   atomic.Pointer[Index]
	ready chan struct{}
	built atomic.Int64 // nanoseconds the first replay took
	loads atomic.Int64

	bg background.Loop
}

// NewFeed validates cfg; Start starts the feed.
func NewFeed(cfg FeedConfig) (*Feed, error) {
	if cfg.Runs == nil {
		return nil, errors.New("runindex: FeedConfig.Runs is required (store.Store.Runs)")
	}
	if cfg.Retry <= 0 {
		cfg.Retry = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case cfg.MaxRuns == 0:
		cfg.MaxRuns = DefaultMaxRuns
	case cfg.MaxRuns < 0:
		cfg.MaxRuns = 0
	}
	return &Feed{cfg: cfg, ready: make(chan struct{})}, nil
}

// Start begins the replay and returns; Ready closes once the index has
// caught up. The feed runs until Stop (ctx only bounds the start).
func (f *Feed) Start(ctx context.Context) error {
	return f.bg.Start(ctx, "runindex: Feed", f.run)
}

// Stop ends the feed and waits for it (or ctx).
func (f *Feed) Stop(ctx context.Context) error {
	return f.bg.Stop(ctx)
}

// Ready is closed once the first replay has caught up.
func (f *Feed) Ready() <-chan struct{} { return f.ready }

// BuildTime is how long the first replay took (0 until Ready).
func (f *Feed) BuildTime() time.Duration { return time.Duration(f.built.Load()) }

// Loads counts the replays that have caught up: 1 after the first, one
// more each time the feed loaded the index again (a watch that ended, a
// reconnect).
func (f *Feed) Loads() int { return int(f.loads.Load()) }

// Index returns the live index, waiting for the first replay until ctx
// ends (ErrNotReady).
func (f *Feed) Index(ctx context.Context) (*Index, error) {
	if x := f.cur.Load(); x != nil {
		return x, nil
	}
	select {
	case <-f.ready:
		return f.cur.Load(), nil
	case <-ctx.Done():
		return nil, ErrNotReady
	}
}

// Lookup returns a run as the index holds it, or, for a run the index does
// not hold (dropped for the cap, or not caught up yet), as the bucket
// does (its record without what the index adds: no Awaiting). It reports
// false for a run neither knows (never submitted, or expired).
func (f *Feed) Lookup(ctx context.Context, runID string, now time.Time) (Run, bool, error) {
	if x := f.cur.Load(); x != nil {
		if r, ok := x.Get(runID, now); ok {
			return r, true, nil
		}
	}
	e, err := f.cfg.Runs.Get(ctx, runID)
	if errors.Is(err, store.ErrRunNotFound) {
		return Run{}, false, nil
	}
	if err != nil {
		return Run{}, false, err
	}
	return Run{Record: e.Record}, true, nil
}

func (f *Feed) run(ctx context.Context) {
	first := true
	for {
		start := time.Now()
		err := f.follow(ctx, func(x *Index) {
			f.cur.Store(x)
			f.loads.Add(1)
			took := time.Since(start)
			if first {
				first = false
				f.built.Store(int64(took))
				close(f.ready)
			}
			f.cfg.Logger.Info("run index loaded", "runs", x.Len(), "took", took.Round(time.Millisecond))
		})
		if ctx.Err() != nil {
			return
		}
		f.cfg.Logger.Warn("run index: the watch of the run index bucket ended; loading it again", "error", err, "retry_in", f.cfg.Retry)
		t := time.NewTimer(f.cfg.Retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// follow replays the bucket into a new index, hands it to caughtUp, and
// applies changes until the watch ends.
func (f *Feed) follow(ctx context.Context, caughtUp func(*Index)) error {
	ch, err := f.cfg.Runs.Watch(ctx)
	if err != nil {
		return err
	}
	x := NewBounded(f.cfg.MaxRuns)
	served := false
	reconnects := f.reconnects()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case c, ok := <-ch:
			if !ok {
				return errors.New("watch closed")
			}
			if c.Kind == store.ChangeCaughtUp {
				if !served {
					served = true
					caughtUp(x)
				}
				continue
			}
			x.Apply(c)
		case <-tick.C:
			if f.reconnects() != reconnects {
				return errors.New("the connection reconnected")
			}
		}
	}
}

func (f *Feed) reconnects() uint64 {
	if f.cfg.Conn == nil {
		return 0
	}
	return f.cfg.Conn.Stats().Reconnects
}
