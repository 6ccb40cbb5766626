package worker

import (
	"context"
	"sync"
	"time"

	"github.com/lovia-fleet/lovia/pkg/store"
)

// holdLinger is how long a removal alone (a run this worker no longer
// holds) waits for a claim's write to carry it before it is written by
// itself: under load the next claim comes first, so a run costs its
// holdings no write of its own at its end.
const holdLinger = 250 * time.Millisecond

// holdings is this worker's holdings record, hold.<worker>: the
// deliveries it holds, each with what a survivor's reaper needs to
// release it (see takeover.go). One writer rewrites the record as a whole
// — a group commit: claims that arrive while a write is in flight are
// carried by the next one — and runs that ended or were released leave it
// lazily, in the next write (or after holdLinger when no claim comes).
// The record is written while the run starts, as the per-run record of
// earlier releases was: until it is stored, a crash of this worker is
// noticed after the ack wait only.
type holdings struct {
	w    *Worker
	mu   sync.Mutex
	runs map[string]heldRun // by run id
	next uint64             // token of the next add
	// dirty: the record differs from runs; wrote: the record exists.
	dirty, wrote bool
	kick         chan struct{} // a claim waits to be written
	idle         chan struct{} // a removal waits to be written
	done         chan struct{}
}

type heldRun struct {
	h     store.Holding
	token uint64
}

func newHoldings(w *Worker) *holdings {
	return &holdings{w: w, runs: map[string]heldRun{}, kick: make(chan struct{}, 1), idle: make(chan struct{}, 1), done: make(chan struct{})}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// add lists a delivery and returns the function that drops it again (a
// later execution of the same run on this worker keeps its own entry).
func (hs *holdings) add(h store.Holding) (drop func()) {
	hs.mu.Lock()
	hs.next++
	token := hs.next
	hs.runs[h.RunID] = heldRun{h: h, token: token}
	hs.dirty = true
	hs.mu.Unlock()
	signal(hs.kick)
	return func() {
		hs.mu.Lock()
		if r, ok := hs.runs[h.RunID]; ok && r.token == token {
			delete(hs.runs, h.RunID)
			hs.dirty = true
		}
		hs.mu.Unlock()
		signal(hs.idle)
	}
}

// writer writes the record until ctx ends, then removes it (a worker
// that stops holds nothing; a crashed one cannot, and its record is what
// the survivors read).
func (hs *holdings) writer(ctx context.Context) {
	defer close(hs.done)
	for {
		select {
		case <-ctx.Done():
			hs.remove()
			return
		case <-hs.kick:
		case <-hs.idle:
			t := time.NewTimer(holdLinger)
			select {
			case <-ctx.Done():
				t.Stop()
				hs.remove()
				return
			case <-hs.kick:
				t.Stop()
			case <-t.C:
			}
		}
		if !hs.write(ctx) {
			// Retried a little later: the record only speeds a takeover
			// up, the ack wait still catches a crash.
			t := time.NewTimer(time.Second)
			select {
			case <-ctx.Done():
				t.Stop()
				hs.remove()
				return
			case <-t.C:
			}
			signal(hs.kick)
		}
	}
}

// write stores the current holdings if they changed since the last
// write; it reports false when the write failed.
func (hs *holdings) write(ctx context.Context) bool {
	hs.mu.Lock()
	if !hs.dirty {
		hs.mu.Unlock()
		return true
	}
	runs := make([]store.Holding, 0, len(hs.runs))
	for _, r := range hs.runs {
		runs = append(runs, r.h)
	}
	hs.dirty = false
	wrote := hs.wrote
	hs.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, hs.w.cfg.StoreTimeout)
	defer cancel()
	var err error
	if len(runs) == 0 {
		if wrote {
			_, err = hs.w.st.Control().ClearHoldings(cctx, hs.w.cfg.ID, 0)
		}
	} else {
		_, err = hs.w.st.Control().SetHoldings(cctx, hs.w.cfg.ID, runs)
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if err != nil {
		hs.dirty = true
		if ctx.Err() == nil {
			hs.w.log.Warn("recording this worker's holdings failed; a crash of this worker is noticed after the ack wait only until a write succeeds", "runs", len(runs), "error", err)
		}
		return false
	}
	hs.wrote = len(runs) > 0
	return true
}

// remove deletes the record at shutdown.
func (hs *holdings) remove() {
	hs.mu.Lock()
	wrote := hs.wrote
	hs.mu.Unlock()
	if !wrote {
		return
	}
	cctx, cancel := context.WithTimeout(context.Background(), hs.w.cfg.StoreTimeout)
	defer cancel()
	_, _ = hs.w.st.Control().ClearHoldings(cctx, hs.w.cfg.ID, 0)
}
