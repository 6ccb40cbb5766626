package schedule

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/lovia-fleet/lovia/internal/background"
	"github.com/lovia-fleet/lovia/pkg/bus"
)

// KeeperConfig configures a Keeper.
type KeeperConfig struct {
	// Manager is the schedules' Manager (required).
	Manager *Manager
	// Grace is how late a fire may be before it counts as missed (default
	// DefaultGrace); it is also how long the Keeper waits after it starts
	// and after its connection reconnects before it looks, so the server
	// fires what it still knows first.
	Grace time.Duration
	// Interval is how often it looks besides (default 1m).
	Interval time.Duration
	// Poll is how often it checks its connection for a reconnect (default
	// 1s).
	Poll time.Duration
	// Logger receives what it fired and its failures (default: discard).
	Logger *slog.Logger
}

// Keeper runs [Manager.CatchUp] when it starts, after its connection
// reconnects (the NATS server restarted, perhaps after a crash) and every
// Interval. Any number of Keepers may run in a fleet: a missed slot fires
// once.
type Keeper struct {
	cfg KeeperConfig
	bg  background.Loop
}

// NewKeeper returns a Keeper; it starts nothing.
func NewKeeper(cfg KeeperConfig) (*Keeper, error) {
	if cfg.Manager == nil {
		return nil, errors.New("schedule: KeeperConfig.Manager is required")
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Keeper{cfg: cfg}, nil
}

// Start starts the Keeper's loop.
func (k *Keeper) Start(ctx context.Context) error {
	return k.bg.Start(ctx, "schedule: Keeper", k.loop)
}

// Stop stops the loop and waits for it (or for ctx).
func (k *Keeper) Stop(ctx context.Context) error {
	return k.bg.Stop(ctx)
}

func (k *Keeper) loop(ctx context.Context) {
	nc := k.cfg.Manager.js.Conn()
	reconnects := nc.Stats().Reconnects
	// The first look is a grace after the start: a server that restarted
	// cleanly fires its missed slot itself meanwhile.
	next := time.Now().Add(k.cfg.Grace)
	poll := time.NewTicker(k.cfg.Poll)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
		}
		now := time.Now()
		if r := nc.Stats().Reconnects; r != reconnects || !nc.IsConnected() {
			// Look a grace after the connection is back: the server may
			// have restarted.
			reconnects = r
			next = now.Add(k.cfg.Grace)
			continue
		}
		if now.Before(next) {
			continue
		}
		next = now.Add(k.cfg.Interval)
		fired, err := k.cfg.Manager.CatchUp(ctx, k.cfg.Grace)
		for _, id := range fired {
			k.cfg.Logger.Info("schedule: fired a slot the server missed", "run_id", id)
		}
		switch {
		case err == nil, ctx.Err() != nil:
		case errors.Is(err, ErrReconnected):
			next = now.Add(k.cfg.Grace)
		case errors.Is(err, bus.ErrStreamMissing):
			// No schedules stream yet: nothing to catch up.
		default:
			// The server may still be recovering: look again soon.
			k.cfg.Logger.Warn("schedule: catch up", "err", err)
			next = now.Add(k.cfg.Grace)
		}
	}
}
