package worker

import (
	"context"
	"sync"
	"time"

	"github.com/lovia-fleet/lovia/pkg/store"
)

// holdLinger is how long a removal alone (a run this worker no longer
// holds) waits for a claim's write to carry it along: removals are
// written in the next batch of writes, not each by itself at once.
const holdLinger = 250 * time.Millisecond

// holdings are this worker's holdings (see takeover.go): a marker,
// hold.<worker>, written before the first run's key, and one key a run,
// hold.<worker>.<run>, with what a survivor's reaper needs to release it.
// One writer writes them in batches: the claims that arrive while a batch
// is in flight go in the next one, a run's key is put once and purged
// once, and a run that ends before its key was written costs no write at
// all. A claim or a release thus costs one small write whatever the
// number of runs this worker holds. A run's key is written while the run
// starts: until it is stored, a crash of this worker is noticed after the
// ack wait only.
type holdings struct {
	w    *Worker
	mu   sync.Mutex
	runs map[string]heldRun // by run id
	next uint64             // token of the next add
	// puts: runs whose key is to be written; drops: keys to remove.
	puts, drops map[string]struct{}
	// marker: the revision of this worker's marker, 0 until written.
	marker uint64
	kick   chan struct{} // a claim waits to be written
	idle   chan struct{} // a removal waits to be written
	done   chan struct{}
}

type heldRun struct {
	h     store.Holding
	token uint64
}

func newHoldings(w *Worker) *holdings {
	return &holdings{w: w, runs: map[string]heldRun{}, puts: map[string]struct{}{}, drops: map[string]struct{}{},
		kick: make(chan struct{}, 1), idle: make(chan struct{}, 1), done: make(chan struct{})}
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
	hs.puts[h.RunID] = struct{}{}
	delete(hs.drops, h.RunID)
	hs.mu.Unlock()
	signal(hs.kick)
	return func() {
		hs.mu.Lock()
		r, ok := hs.runs[h.RunID]
		if !ok || r.token != token {
			hs.mu.Unlock()
			return
		}
		delete(hs.runs, h.RunID)
		if _, unwritten := hs.puts[h.RunID]; unwritten {
			delete(hs.puts, h.RunID) // never written: nothing to remove
			hs.mu.Unlock()
			return
		}
		hs.drops[h.RunID] = struct{}{}
		hs.mu.Unlock()
		signal(hs.idle)
	}
}

// markerGone tells the writer that this worker's marker was removed at
// revision rev (a survivor took this worker for dead, or a process that
// took over its id released them): when that is after the marker it
// wrote, the marker and every run key it holds are written again.
func (hs *holdings) markerGone(rev uint64) {
	hs.mu.Lock()
	if hs.marker == 0 || rev <= hs.marker {
		hs.mu.Unlock()
		return
	}
	hs.marker = 0
	for id := range hs.runs {
		hs.puts[id] = struct{}{}
	}
	clear(hs.drops)
	hs.mu.Unlock()
	signal(hs.kick)
}

// writer writes the holdings until ctx ends, then removes them (a worker
// that stops holds nothing; a crashed one cannot, and its keys are what
// the survivors read).
func (hs *holdings) writer(ctx context.Context) {
	defer close(hs.done)
	wait := func(d time.Duration, kick bool) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		var k chan struct{}
		if kick {
			k = hs.kick
		}
		select {
		case <-ctx.Done():
			return false
		case <-k:
		case <-t.C:
		}
		return true
	}
	for {
		select {
		case <-ctx.Done():
			hs.remove()
			return
		case <-hs.kick:
		case <-hs.idle:
			if !wait(holdLinger, true) {
				hs.remove()
				return
			}
		}
		// Retried a little later: the keys only speed a takeover up,
		// the ack wait still catches a crash.
		if !hs.write(ctx) {
			if !wait(time.Second, false) {
				hs.remove()
				return
			}
			signal(hs.kick)
		}
	}
}

// write stores the marker, if not yet written, and the pending run keys,
// then removes the pending drops; it reports false when a write failed
// (what failed stays pending).
func (hs *holdings) write(ctx context.Context) bool {
	hs.mu.Lock()
	puts := make([]store.Holding, 0, len(hs.puts))
	for id := range hs.puts {
		puts = append(puts, hs.runs[id].h)
	}
	drops := make([]string, 0, len(hs.drops))
	for id := range hs.drops {
		drops = append(drops, id)
	}
	clear(hs.puts)
	clear(hs.drops)
	announce := hs.marker == 0 && len(puts) > 0
	hs.mu.Unlock()
	if len(puts) == 0 && len(drops) == 0 {
		return true
	}
	cctx, cancel := context.WithTimeout(ctx, hs.w.cfg.StoreTimeout)
	defer cancel()
	c := hs.w.st.Control()
	var err error
	if announce {
		var rev uint64
		if rev, err = c.AnnounceHoldings(cctx, hs.w.cfg.ID); err == nil {
			hs.mu.Lock()
			hs.marker = rev
			hs.mu.Unlock()
		}
	}
	if err == nil {
		err = c.Hold(cctx, hs.w.cfg.ID, puts)
	}
	if err == nil {
		err = c.Unhold(cctx, hs.w.cfg.ID, drops)
	}
	if err == nil {
		return true
	}
	hs.mu.Lock()
	// Everything of this batch goes again (writes are idempotent), but
	// for runs that moved on meanwhile.
	for _, h := range puts {
		if r, ok := hs.runs[h.RunID]; ok && r.h == h {
			hs.puts[h.RunID] = struct{}{}
		} else if !ok {
			hs.drops[h.RunID] = struct{}{}
		}
	}
	for _, id := range drops {
		if _, ok := hs.runs[id]; !ok {
			hs.drops[id] = struct{}{}
		}
	}
	held := len(hs.runs)
	hs.mu.Unlock()
	if ctx.Err() == nil {
		hs.w.log.Warn("recording this worker's holdings failed; a crash of this worker is noticed after the ack wait only until a write succeeds", "runs", held, "error", err)
	}
	return false
}

// remove deletes the marker and the run keys at shutdown.
func (hs *holdings) remove() {
	hs.mu.Lock()
	wrote := hs.marker != 0
	hs.mu.Unlock()
	if !wrote {
		return
	}
	cctx, cancel := context.WithTimeout(context.Background(), hs.w.cfg.StoreTimeout)
	defer cancel()
	_, _ = hs.w.st.Control().ClearHoldings(cctx, hs.w.cfg.ID, 0)
}
