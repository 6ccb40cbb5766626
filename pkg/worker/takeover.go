package worker

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lovia-fleet/lovia/pkg/bus"
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
// Each worker keeps its holdings (see holdings.go): a marker,
// hold.<worker>, and one key a run it holds, hold.<worker>.<run>, with the
// run's ack subject, request sequence and attempt — put at the claim,
// purged when the run leaves, by one writer in batches. It answers pings
// on <prefix>.worker.<id>.ping, and watches every worker's marker (not
// their run keys: a claim elsewhere costs this worker nothing). Only the
// survivor whose compare-and-delete of a dead worker's marker succeeds
// releases its runs, and only those whose run record still names the dead
// worker's claim as running: the release transition in the index (a
// compare-and-set) comes before the NAK, so a listed run that ended,
// parked, was released or claimed since (a redelivery) is left alone, and
// a run is released once. A worker whose marker another removed (it was
// taken for dead) writes its marker and run keys again.
//
// A marker of the release before run keys is the whole record of the
// worker's runs: a survivor reads its runs too, so it still releases the
// runs of a dead worker of that release.
//
// Workers of releases before the holdings record wrote own.<worker>.<run>
// per run; their records are not watched (a fleet mixing releases is not
// supported: see the README's upgrading section), only read by Owned.

func (w *Worker) presenceSubject(id string) string { return w.names.WorkerPing(id) }

// startTakeover starts the presence responder, the holdings writer, the
// reaper and the park timers.
func (w *Worker) startTakeover(ctx context.Context) error {
	sub, err := w.cfg.Conn.Subscribe(w.presenceSubject(w.cfg.ID), w.onPing)
	if err != nil {
		return err
	}
	w.presenceSub = sub
	updates, err := w.st.Control().WatchHoldings(ctx)
	if err != nil {
		return err
	}
	timers, err := w.st.Control().WatchParkTimers(ctx)
	if err != nil {
		return err
	}
	w.reaperDone = make(chan struct{})
	w.timersDone = make(chan struct{})
	w.hold = newHoldings(w)
	go w.hold.writer(ctx)
	go w.reaper(ctx, updates)
	go func() {
		defer close(w.timersDone)
		w.parkTimers(ctx, timers)
	}()
	return nil
}

// reaper tracks the other workers' holdings records and releases the runs
// of dead workers. It ends after the holdings writer, which ends with ctx.
func (w *Worker) reaper(ctx context.Context, updates <-chan store.Holdings) {
	defer close(w.reaperDone)
	defer func() { <-w.hold.done }()
	held := map[string]store.Holdings{} // worker → its latest record
	absent := map[string]time.Time{}    // worker → first seen absent
	tick := time.NewTicker(w.cfg.TakeoverInterval)
	defer tick.Stop()
	reconnects := w.cfg.Conn.Stats().Reconnects
	var reconnectedAt time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case h, ok := <-updates:
			if !ok {
				return
			}
			if h.Worker == w.cfg.ID {
				if h.Deleted {
					w.hold.markerGone(h.Revision)
				}
				continue
			}
			if h.Deleted {
				delete(held, h.Worker)
				continue
			}
			held[h.Worker] = h
		case <-tick.C:
			now := time.Now()
			if n := w.cfg.Conn.Stats().Reconnects; n != reconnects || !w.cfg.Conn.IsConnected() {
				// This worker was cut off itself (a NATS restart, a lost
				// node): every other worker may be reconnecting too, so
				// absences count from now, with the long grace.
				reconnects, reconnectedAt = n, now
				clear(absent)
				w.checkID(ctx)
				continue
			}
			grace := w.takeoverGrace(now, reconnectedAt)
			for worker := range absent {
				if _, ok := held[worker]; !ok {
					delete(absent, worker)
				}
			}
			for worker, h := range held {
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
				delete(held, worker)
				w.releaseWorker(ctx, h)
			}
		}
	}
}

// releaseWorker releases the runs a dead worker's holdings list, if this
// worker wins its marker (its compare-and-delete, which removes the run
// keys too). The watch gave the marker's revision only: the runs are read
// now, and a marker written since the watch saw it (the worker is not dead
// after all) is left.
func (w *Worker) releaseWorker(ctx context.Context, seen store.Holdings) {
	h, err := w.st.Control().ReadHoldings(ctx, seen.Worker)
	if err != nil {
		w.log.Warn("takeover: reading a dead worker's holdings record failed; its runs wait for the ack wait", "dead_worker", seen.Worker, "error", err)
		return
	}
	if h.Deleted || h.Revision != seen.Revision {
		return // another survivor took it, or the worker wrote since
	}
	won, err := w.st.Control().ClearHoldings(ctx, h.Worker, h.Revision)
	if err != nil {
		w.log.Warn("takeover: taking a dead worker's holdings record failed; its runs wait for the ack wait", "dead_worker", h.Worker, "error", err)
		return
	}
	if !won {
		return // another survivor took it, or the worker wrote since
	}
	// Each release is a few round trips to the broker (the record's read
	// and compare-and-set, the NAK, the lost-run check): one after
	// another, a dead worker's 10,000 runs took a minute to come back.
	// Runs are independent, so releaseParallel of them go at once.
	var wg sync.WaitGroup
	slots := make(chan struct{}, releaseParallel)
	for _, r := range h.Runs {
		w.mu.Lock()
		_, mine := w.active[r.RunID]
		w.mu.Unlock()
		if mine {
			continue // already redelivered here
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			w.releaseDead(ctx, h.Worker, r)
		})
	}
	wg.Wait()
}

// releaseParallel is how many of a dead worker's runs a survivor releases
// at once.
const releaseParallel = 64

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

// releaseDead releases a run a dead worker's holdings list if the run's
// record still says that worker's claim runs it: the release transition
// in the index, then a NAK on the dead delivery's ack subject.
func (w *Worker) releaseDead(ctx context.Context, dead string, r store.Holding) {
	log := w.log.With("run_id", r.RunID, "dead_worker", dead)
	// One read and one compare-and-set: the record is checked inside the
	// modification, not read once before it as well (each round trip counts
	// when a dead worker's thousands of runs are released).
	holder := lifecycle.Holder{Worker: dead, Attempt: r.Attempt}
	e, err := w.st.Runs().Modify(ctx, r.RunID, func(rec *store.RunRecord) error {
		if rec.Worker != dead || rec.Status != lifecycle.Running {
			// Ended, parked, released, or claimed since by another worker
			// (a NAK by stream sequence would hit its live delivery): the
			// entry was only not yet dropped.
			return errNotReleased
		}
		next, err := lifecycle.Release(*rec, holder)
		if err != nil {
			return err
		}
		*rec = next
		return nil
	})
	switch {
	case errors.Is(err, store.ErrRunNotFound):
		// No record (it expired): the NAK alone, as the holder would.
	case errors.Is(err, errNotReleased), errors.Is(err, lifecycle.ErrNotHolder):
		return // a later claim, or the run moved on
	case err != nil:
		log.Warn("takeover: recording the release in the run index failed; the run waits for the ack wait", "error", err)
		return
	}
	if err := w.cfg.Conn.Publish(r.Ack, []byte("-NAK")); err != nil {
		log.Warn("takeover: releasing a dead worker's run failed; it waits for the ack wait", "error", err)
		return
	}
	w.m.takeovers.Inc()
	log.Info("takeover: released the run of a worker that is gone")
	// No run left behind: a released run whose request is gone (it was
	// acknowledged or terminated while the record said otherwise) would
	// never end by itself. The request the release recorded is looked up
	// first, the whole check made only when it is gone.
	if e != nil && e.Record.RequestSeq != 0 {
		if stored, err := bus.RequestStored(ctx, w.js, w.names, e.Record.RequestSeq); err == nil && stored {
			return
		}
	}
	w.checkLost(ctx, r.RunID)
}

// errNotReleased: the run a dead worker's holdings list is not its
// running run any more.
var errNotReleased = errors.New("not the dead worker's running run")
