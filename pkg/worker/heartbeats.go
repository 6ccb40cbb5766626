package worker

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// cancelBeats is how many beats apart a run's cancel record is read.
const cancelBeats = 6

// heartbeats keeps the claims of the worker's executions alive: one
// goroutine and one ticker for all of them, not one each (a run shorter
// than the heartbeat interval costs its claim nothing but a map entry).
// Each execution gets a progress ack at most Heartbeat after its start or
// its previous beat, and a read of its cancel record (the backstop of a
// cancel notification missed) every cancelBeats beats: a live run costs
// the broker a progress ack a beat and a cancel read every six (a minute
// at the default 10s), not a read a beat too.
type heartbeats struct {
	w      *Worker
	every  time.Duration // the tick: a quarter of Heartbeat
	reread time.Duration // cancelBeats beats: how often a cancel record is read
	mu     sync.Mutex
	beats  map[*beat]struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

// beat is one execution's heartbeat.
type beat struct {
	msg   jetstream.Msg
	runID string
	ar    *activeRun
	due   time.Time
	read  time.Time // the last cancel read (the execution's start)
}

func newHeartbeats(w *Worker) *heartbeats {
	every := max(w.cfg.Heartbeat/4, time.Millisecond)
	return &heartbeats{w: w, every: every, reread: cancelBeats * w.cfg.Heartbeat, beats: map[*beat]struct{}{}}
}

// start runs the heartbeat loop until stop.
func (hb *heartbeats) start() {
	ctx, cancel := context.WithCancel(context.Background())
	hb.cancel, hb.done = cancel, make(chan struct{})
	go hb.loop(ctx)
}

// stop ends the loop and waits for it (nothing when it never started).
func (hb *heartbeats) stop() {
	if hb != nil && hb.cancel != nil {
		hb.cancel()
		<-hb.done
	}
}

// add starts heartbeats for an execution and returns the function that
// stops them.
func (hb *heartbeats) add(msg jetstream.Msg, runID string, ar *activeRun) (remove func()) {
	now := time.Now()
	b := &beat{msg: msg, runID: runID, ar: ar, due: now.Add(hb.w.cfg.Heartbeat - hb.every), read: now}
	hb.mu.Lock()
	hb.beats[b] = struct{}{}
	hb.mu.Unlock()
	return func() {
		hb.mu.Lock()
		delete(hb.beats, b)
		hb.mu.Unlock()
	}
}

func (hb *heartbeats) loop(ctx context.Context) {
	defer close(hb.done)
	t := time.NewTicker(hb.every)
	defer t.Stop()
	var due []*beat
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			due = due[:0]
			next := now.Add(hb.w.cfg.Heartbeat - hb.every)
			hb.mu.Lock()
			for b := range hb.beats {
				if !now.Before(b.due) {
					b.due = next
					due = append(due, b)
				}
			}
			hb.mu.Unlock()
			for _, b := range due {
				if err := b.msg.InProgress(); err != nil {
					hb.w.log.Debug("heartbeat failed", "run_id", b.runID, "error", err)
				}
				if b.ar.cancel.Err() == nil && now.Sub(b.read) >= hb.reread-hb.every {
					b.read = now
					// A cancel record the notification missed: read it
					// without holding up the other runs' beats.
					b := b
					hb.w.pool.Go(func() { hb.w.applyCancel(ctx, b.runID, b.ar) })
				}
			}
		}
	}
}
