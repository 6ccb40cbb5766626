package fleet

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Announcer keeps a worker's announcement fresh while it lives: Start
// announces once (and fails if it cannot), then refreshes every interval;
// Stop ends the refreshes and withdraws the announcement.
type Announcer struct {
	reg      *Registry
	member   Member
	interval time.Duration
	log      *slog.Logger

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	live   func(*Member)
}

// Live sets a function that fills the member's changing fields (the runs
// in flight) before every refresh. Call it before Start.
func (a *Announcer) Live(f func(*Member)) { a.live = f }

// NewAnnouncer builds an Announcer. It starts nothing.
func NewAnnouncer(reg *Registry, m Member, interval time.Duration, log *slog.Logger) *Announcer {
	if interval <= 0 {
		interval = DefaultInterval
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Announcer{reg: reg, member: m, interval: interval, log: log}
}

// Start announces the member and starts refreshing it.
func (a *Announcer) Start(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.done != nil {
		return errors.New("fleet: Announcer started twice")
	}
	if err := a.reg.Announce(ctx, a.member); err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(context.Background())
	a.cancel, a.done = cancel, make(chan struct{})
	go a.refresh(rctx)
	return nil
}

func (a *Announcer) refresh(ctx context.Context) {
	defer close(a.done)
	t := time.NewTicker(a.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.mu.Lock()
			m := a.member
			a.mu.Unlock()
			if a.live != nil {
				a.live(&m)
			}
			cctx, cancel := context.WithTimeout(ctx, a.interval)
			if err := a.reg.Announce(cctx, m); err != nil && ctx.Err() == nil {
				a.log.Warn("fleet: refreshing this worker's announcement failed; retrying", "error", err)
			}
			cancel()
		}
	}
}

// Stop ends the refreshes and withdraws the announcement. It is safe to
// call without Start, and more than once.
func (a *Announcer) Stop(ctx context.Context) error {
	a.mu.Lock()
	cancel, done, worker := a.cancel, a.done, a.member.Worker
	a.cancel = nil
	a.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	<-done
	return a.reg.Withdraw(ctx, worker)
}

// Update replaces the announced member (the agents a worker serves
// changed) and announces it at once; a failure is retried at the next
// refresh.
func (a *Announcer) Update(m Member) {
	// Held across the put: a Stop waits for it, so its withdrawal comes
	// after, never before, this announcement.
	a.mu.Lock()
	defer a.mu.Unlock()
	a.member = m
	if a.cancel == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.interval)
	defer cancel()
	if err := a.reg.Announce(ctx, m); err != nil {
		a.log.Warn("fleet: announcing this worker's new agents failed; retrying at the next refresh", "error", err)
	}
}
