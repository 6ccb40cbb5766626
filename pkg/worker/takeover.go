package worker

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lovia-fleet/lovia/pkg/store"
)

// Fast takeover. Redelivery after the ack wait is the crash detector of
// last resort. When a worker is gone — its presence subject has had no
// responders, which the server knows the moment the dead process's TCP
// connection closes, for TakeoverGrace (a worker that is only reconnecting
// after a NATS restart is absent too, briefly) — a surviving worker
// releases the dead worker's deliveries with a NAK on their ack subjects,
// so another worker resumes them within seconds instead of the ack wait.
//
// Each worker records "own.<worker>.<run> = ack subject" while it holds a
// run, answers pings on <prefix>.worker.<id>.ping, and watches the
// ownership records. Only the survivor whose compare-and-delete of a
// record succeeds sends the NAK, so a run is released once.

func (w *Worker) presenceSubject(id string) string {
	return w.names.Prefix() + ".worker." + id + ".ping"
}

// startTakeover starts the presence responder, the reaper and the park
// timers.
func (w *Worker) startTakeover(ctx context.Context) error {
	sub, err := w.cfg.Conn.Subscribe(w.presenceSubject(w.cfg.ID), func(m *nats.Msg) { _ = m.Respond([]byte("pong")) })
	if err != nil {
		return err
	}
	w.presenceSub = sub
	updates, err := w.st.Control().WatchOwners(ctx)
	if err != nil {
		_ = sub.Unsubscribe()
		return err
	}
	timers, err := w.st.Control().WatchParkTimers(ctx)
	if err != nil {
		_ = sub.Unsubscribe()
		return err
	}
	w.reaperDone = make(chan struct{})
	w.timersDone = make(chan struct{})
	go w.reaper(ctx, updates)
	go func() {
		defer close(w.timersDone)
		w.parkTimers(ctx, timers)
	}()
	return nil
}

// reaper tracks ownership records and releases the runs of dead workers.
func (w *Worker) reaper(ctx context.Context, updates <-chan store.Ownership) {
	defer close(w.reaperDone)
	owned := map[string]map[string]store.Ownership{} // worker → run → record
	absent := map[string]time.Time{}                 // worker → first seen absent
	tick := time.NewTicker(w.cfg.TakeoverInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case o, ok := <-updates:
			if !ok {
				return
			}
			if o.Worker == w.cfg.ID {
				continue
			}
			runs := owned[o.Worker]
			if o.Deleted {
				delete(runs, o.RunID)
				if len(runs) == 0 {
					delete(owned, o.Worker)
				}
				continue
			}
			if runs == nil {
				runs = map[string]store.Ownership{}
				owned[o.Worker] = runs
			}
			runs[o.RunID] = o
		case <-tick.C:
			for worker := range absent {
				if owned[worker] == nil {
					delete(absent, worker)
				}
			}
			for worker, runs := range owned {
				if w.alive(ctx, worker) {
					delete(absent, worker)
					continue
				}
				// Gone, or only reconnecting: wait out the grace period.
				since, ok := absent[worker]
				if !ok {
					absent[worker] = time.Now()
					continue
				}
				if time.Since(since) < w.cfg.TakeoverGrace {
					continue
				}
				delete(absent, worker)
				for run, o := range runs {
					if w.ownedElsewhere(owned, worker, run) {
						// Already redelivered to a live worker: drop the
						// stale record without touching the delivery.
						_, _ = w.st.Control().TakeOwnership(ctx, o)
					} else {
						w.release(ctx, o)
					}
					delete(runs, run)
				}
				delete(owned, worker)
			}
		}
	}
}

// alive pings a worker; only "no responders" counts as gone.
func (w *Worker) alive(ctx context.Context, worker string) bool {
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := w.cfg.Conn.RequestWithContext(pctx, w.presenceSubject(worker), nil)
	return !errors.Is(err, nats.ErrNoResponders)
}

// release NAKs a dead worker's delivery if this worker wins its record.
func (w *Worker) release(ctx context.Context, o store.Ownership) {
	// The index names the worker that claimed the run last: when that is
	// no longer the dead one, its delivery was already handed on.
	if e, err := w.st.Runs().Get(ctx, o.RunID); err == nil && e.Record.Worker != o.Worker {
		_, _ = w.st.Control().TakeOwnership(ctx, o)
		return
	}
	won, err := w.st.Control().TakeOwnership(ctx, o)
	if err != nil || !won {
		return
	}
	if err := w.cfg.Conn.Publish(o.Ack, []byte("-NAK")); err != nil {
		w.log.Warn("takeover: releasing a dead worker's run failed; it waits for the ack wait", "run_id", o.RunID, "dead_worker", o.Worker, "error", err)
		return
	}
	w.m.takeovers.Inc()
	w.log.Info("takeover: released the run of a worker that is gone", "run_id", o.RunID, "dead_worker", o.Worker)
}

// ownedElsewhere reports whether a worker other than dead holds run, or
// this worker does.
func (w *Worker) ownedElsewhere(owned map[string]map[string]store.Ownership, dead, run string) bool {
	w.mu.Lock()
	_, mine := w.active[run]
	w.mu.Unlock()
	if mine {
		return true
	}
	for worker, runs := range owned {
		if worker == dead {
			continue
		}
		if _, ok := runs[run]; ok {
			return true
		}
	}
	return false
}
