package worker

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lovia-fleet/lovia/pkg/lifecycle"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// Fast takeover. Redelivery after the ack wait is the crash detector of
// last resort. When a worker is gone — its presence subject has had no
// responders, which the server knows the moment the dead process's TCP
// connection closes, for TakeoverGrace (1s; a worker that is only
// reconnecting after a NATS restart is absent too, so a survivor that has
// just reconnected itself waits ReconnectGrace, 5s) — a surviving worker
// releases the dead worker's deliveries with a NAK on their ack subjects,
// so another worker resumes them within seconds instead of the ack wait.
//
// Each worker records "own.<worker>.<run> = ack subject" while it holds a
// run, answers pings on <prefix>.worker.<id>.ping, and watches the
// ownership records. Only the survivor whose compare-and-delete of a
// record succeeds sends the NAK, so a run is released once.

func (w *Worker) presenceSubject(id string) string { return w.names.WorkerPing(id) }

// startTakeover starts the presence responder, the reaper and the park
// timers.
func (w *Worker) startTakeover(ctx context.Context) error {
	sub, err := w.cfg.Conn.Subscribe(w.presenceSubject(w.cfg.ID), w.onPing)
	if err != nil {
		return err
	}
	w.presenceSub = sub
	updates, err := w.st.Control().WatchOwners(ctx)
	if err != nil {
		return err
	}
	timers, err := w.st.Control().WatchParkTimers(ctx)
	if err != nil {
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
	reconnects := w.cfg.Conn.Stats().Reconnects
	var reconnectedAt time.Time
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
			now := time.Now()
			if n := w.cfg.Conn.Stats().Reconnects; n != reconnects || !w.cfg.Conn.IsConnected() {
				// This worker was cut off itself (a NATS restart, a lost
				// node): every other worker may be reconnecting too, so
				// absences count from now, with the long grace.
				reconnects, reconnectedAt = n, now
				clear(absent)
				continue
			}
			grace := w.takeoverGrace(now, reconnectedAt)
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
					absent[worker] = now
					continue
				}
				if now.Sub(since) < grace {
					continue
				}
				delete(absent, worker)
				for run, o := range runs {
					if w.ownedElsewhere(owned, worker, run) {
						// Already redelivered to a live worker: drop the
						// stale record without touching the delivery.
						_, _ = w.st.Control().TakeOwnership(ctx, o)
					} else {
						w.releaseDead(ctx, o)
					}
					delete(runs, run)
				}
				delete(owned, worker)
			}
		}
	}
}

// takeoverGrace is how long a worker must stay absent before its runs are
// released: TakeoverGrace, or ReconnectGrace while this worker's own
// reconnection (at reconnectedAt) is recent — after a NATS restart every
// worker is absent until its own reconnect, which a dead one never makes.
func (w *Worker) takeoverGrace(now, reconnectedAt time.Time) time.Duration {
	if !reconnectedAt.IsZero() && now.Sub(reconnectedAt) < w.cfg.ReconnectWindow {
		return w.cfg.ReconnectGrace
	}
	return w.cfg.TakeoverGrace
}

// Presence pings. An empty ping asks whether the worker is there ("pong");
// a ping naming a run and its request's stream sequence ("<run> <seq>")
// asks whether the worker executes that request now ("held" or "free").
const (
	pingHeld = "held"
	pingFree = "free"
)

func (w *Worker) onPing(m *nats.Msg) {
	if len(m.Data) == 0 {
		_ = m.Respond([]byte("pong"))
		return
	}
	run, seqText, _ := strings.Cut(string(m.Data), " ")
	seq, _ := strconv.ParseUint(seqText, 10, 64)
	w.mu.Lock()
	ar := w.active[run]
	w.mu.Unlock()
	if ar != nil && ar.seq == seq && ar.parking.Load() == nil {
		_ = m.Respond([]byte(pingHeld))
		return
	}
	_ = m.Respond([]byte(pingFree))
}

// What a holder check found.
const (
	holderGone  = iota // answered free, or gone from the fleet
	holderHolds        // answered held (or answered at all, but not free)
	holderAway         // no answer, but still announced in the fleet
)

// holds asks worker whether it executes run under the request stored at
// seq. Any answer but "free" means it does (a worker of an earlier release
// answers "pong" to every ping). No responders means it is gone only once
// its fleet announcement is stale too: after a NATS restart a live worker
// has no responders until its reconnect. A ping that times out (a frozen
// or cut-off process, whose claim the server already gave up on) means it
// is gone: fencing stops it at its next write if it ever wakes.
func (w *Worker) holds(ctx context.Context, worker, run string, seq uint64) int {
	if worker == "" || worker == w.cfg.ID {
		return holderGone
	}
	pctx, cancel := context.WithTimeout(ctx, w.cfg.PingTimeout)
	defer cancel()
	rep, err := w.cfg.Conn.RequestWithContext(pctx, w.presenceSubject(worker), []byte(run+" "+strconv.FormatUint(seq, 10)))
	if err == nil {
		if string(rep.Data) == pingFree {
			return holderGone
		}
		return holderHolds
	}
	if !errors.Is(err, nats.ErrNoResponders) {
		return holderGone
	}
	mctx, mcancel := context.WithTimeout(ctx, w.cfg.StoreTimeout)
	defer mcancel()
	ms, merr := w.fleet.Members(mctx)
	if merr != nil {
		return holderAway // cannot tell: ask again later
	}
	for _, m := range ms {
		if m.Worker == worker {
			return holderAway
		}
	}
	return holderGone
}

// alive pings a worker; only "no responders" counts as gone.
func (w *Worker) alive(ctx context.Context, worker string) bool {
	pctx, cancel := context.WithTimeout(ctx, w.cfg.PingTimeout)
	defer cancel()
	_, err := w.cfg.Conn.RequestWithContext(pctx, w.presenceSubject(worker), nil)
	return !errors.Is(err, nats.ErrNoResponders)
}

// releaseDead releases a dead worker's run if this worker wins its
// ownership record: the release transition in the index, then a NAK on the
// dead delivery's ack subject.
func (w *Worker) releaseDead(ctx context.Context, o store.Ownership) {
	// The index names the worker that claimed the run last: when that is
	// no longer the dead one, its delivery was already handed on.
	e, err := w.st.Runs().Get(ctx, o.RunID)
	if err == nil && e.Record.Worker != o.Worker {
		_, _ = w.st.Control().TakeOwnership(ctx, o)
		return
	}
	won, err := w.st.Control().TakeOwnership(ctx, o)
	if err != nil || !won {
		return
	}
	if e != nil {
		holder := lifecycle.Holder{Worker: o.Worker, Attempt: e.Record.Attempt}
		_, err := w.st.Runs().Modify(ctx, o.RunID, lifecycle.Modify(func(r store.RunRecord) (store.RunRecord, error) {
			return lifecycle.Release(r, holder)
		}))
		if errors.Is(err, lifecycle.ErrNotHolder) {
			// Claimed since by another worker: a NAK by stream sequence
			// would hit its live delivery.
			return
		}
		if err != nil {
			w.log.Warn("takeover: recording the release in the run index failed", "run_id", o.RunID, "error", err)
		}
	}
	if err := w.cfg.Conn.Publish(o.Ack, []byte("-NAK")); err != nil {
		w.log.Warn("takeover: releasing a dead worker's run failed; it waits for the ack wait", "run_id", o.RunID, "dead_worker", o.Worker, "error", err)
		return
	}
	w.m.takeovers.Inc()
	w.log.Info("takeover: released the run of a worker that is gone", "run_id", o.RunID, "dead_worker", o.Worker)
	// No run left behind: a released run whose request is gone (it was
	// acknowledged or terminated while the record said otherwise) would
	// never end by itself.
	w.checkLost(ctx, o.RunID)
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
