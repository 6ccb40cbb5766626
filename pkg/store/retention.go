package store

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/internal/background"
	"github.com/lovia-fleet/lovia/pkg/bus"
)

// Retention: an ended run's record is written with a per-message TTL
// (Config.Retention), so the server removes it that long after its last
// change, and places an expiry marker on its key (the run index bucket's
// subject delete markers, kept DefaultExpiryMarkerTTL). A [Reaper] watches
// for those markers and removes what else the run left: its checkpoint
// segments, mailbox keys (queued, spent, and the delete markers drains
// leave), approval decisions and waits, cancel request, park timer and
// chunks. Live runs carry no TTL, so nothing
// of a queued, running or parked run expires.

// DefaultExpiryMarkerTTL is how long the run index bucket keeps the marker
// the server places when an ended run's record expires: a [Reaper] (every
// API instance runs one) must see it within this window, or the run's
// other keys stay until removed by hand.
const DefaultExpiryMarkerTTL = bus.DefaultRunMarkerTTL

// Reap removes the keys of a run whose record is gone (expired). The
// expiry marker stays until its own TTL removes it: every watcher of the
// bucket (the run indexes) must see it, and a consumer that is behind
// would miss a marker purged before it got there. A run whose record
// exists again — its id was submitted anew after the
// expiry — is left alone. Reaping a run twice, or one that left nothing,
// is not an error.
func (s *Store) Reap(ctx context.Context, runID string) error {
	const op = "reap"
	if err := checkID(op, "run id", runID); err != nil {
		return err
	}
	if _, err := s.runs.Get(ctx, runID); err == nil {
		return nil // submitted again: its keys are the new run's
	} else if !errors.Is(err, ErrRunNotFound) {
		return err
	}
	rb := s.runs.b
	s.checkpoints.cache.drop(runID)
	steps := []struct {
		b      *bucket
		filter string
	}{
		{s.checkpoints.b, runID + ".>"},
		{s.mailbox, runID + ".>"},
		{rb, runID + ".*.>"}, // decisions, waits, chunks: everything but the record and the cancel
		{rb, runID + ".cancel"},
		{rb, parkKey(runID)},
	}
	for _, st := range steps {
		if err := st.b.purge(ctx, st.filter); err != nil {
			return wrapErr(op, runID, err)
		}
	}
	return nil
}

// ReaperConfig configures a Reaper.
type ReaperConfig struct {
	// Store is the fleet's stores. Required.
	Store *Store
	// Retry is how long the reaper waits before watching again after its
	// watch ended. Default 1s.
	Retry time.Duration
	// Logger receives reaping failures. Default: discard.
	Logger *slog.Logger
}

// Reaper removes the keys of ended runs whose record expired (see
// [Store.Reap]): it watches the run index bucket's record keys (headers
// only) for the server's expiry markers, those placed while no reaper ran
// included (while the bucket keeps them: a restart reaps them again,
// which finds nothing left), and reaps each run once per marker seen. Any number of reapers may run at once: reaping is idempotent.
type Reaper struct {
	cfg ReaperConfig

	bg background.Loop
}

// NewReaper validates cfg; Start starts the reaper.
func NewReaper(cfg ReaperConfig) (*Reaper, error) {
	if cfg.Store == nil {
		return nil, errors.New("store: ReaperConfig.Store is required")
	}
	if cfg.Retry <= 0 {
		cfg.Retry = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Reaper{cfg: cfg}, nil
}

// Start begins watching and returns; the reaper runs until Stop.
func (r *Reaper) Start(ctx context.Context) error {
	return r.bg.Start(ctx, "store: Reaper", r.run)
}

// Stop ends the reaper and waits for it (or ctx).
func (r *Reaper) Stop(ctx context.Context) error {
	return r.bg.Stop(ctx)
}

func (r *Reaper) run(ctx context.Context) {
	for {
		err := r.watch(ctx)
		if ctx.Err() != nil {
			return
		}
		r.cfg.Logger.Warn("store: reaper: the watch of the run index bucket ended; watching again", "error", err, "retry_in", r.cfg.Retry)
		t := time.NewTimer(r.cfg.Retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (r *Reaper) watch(ctx context.Context) error {
	b := r.cfg.Store.runs.b
	w, err := b.kv.Watch(ctx, "*.rec", jetstream.MetaOnly())
	if err != nil {
		return err
	}
	defer stopWatch(w)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("watch closed")
			}
			if e == nil || e.Operation() == jetstream.KeyValuePut {
				continue
			}
			run, ok := strings.CutSuffix(e.Key(), ".rec")
			if !ok || !validID(run) {
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, 4*b.timeout)
			err := r.cfg.Store.Reap(rctx, run)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				r.cfg.Logger.Warn("store: reaper: removing an expired run's keys failed; they stay until a reaper watches again (a restart)", "run_id", run, "error", err)
			}
		}
	}
}
