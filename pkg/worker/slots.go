package worker

import (
	"context"
	"slices"
	"sync"
)

// slotPool is a worker's run slots (Config.Concurrency of them), shared by
// the claim loops of its agents: a run takes one before it starts and gives
// it back when its execution ends. A slot given back goes to the first
// waiter — a request already fetched (see holdForSlot) before any claim
// loop, each in arrival order — so no slot stays free while one waits.
type slotPool struct {
	mu   sync.Mutex
	free int
	// held are requests fetched without a slot, waiting for one; loops are
	// claim loops reserving slots for a fetch. Both in arrival order.
	held, loops []chan struct{}
	// room is closed when a slot is free for no waiter (nil while none
	// waits for that); open is always closed.
	room, open chan struct{}
}

func newSlotPool(n int) *slotPool {
	p := &slotPool{free: n, open: make(chan struct{})}
	close(p.open)
	return p
}

// tryAcquire takes a free slot if there is one.
func (p *slotPool) tryAcquire() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.free == 0 {
		return false
	}
	p.free--
	return true
}

// acquire takes a slot, waiting for one until ctx ends. A fetched request
// (held) is served before the claim loops.
func (p *slotPool) acquire(ctx context.Context, held bool) error {
	p.mu.Lock()
	if p.free > 0 {
		p.free--
		p.mu.Unlock()
		return nil
	}
	ch := make(chan struct{}, 1)
	if held {
		p.held = append(p.held, ch)
	} else {
		p.loops = append(p.loops, ch)
	}
	p.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	if i := slices.Index(p.held, ch); i >= 0 {
		p.held = slices.Delete(p.held, i, i+1)
	} else if i := slices.Index(p.loops, ch); i >= 0 {
		p.loops = slices.Delete(p.loops, i, i+1)
	} else {
		// Handed a slot as ctx ended: give it on.
		p.mu.Unlock()
		p.release()
		return ctx.Err()
	}
	p.mu.Unlock()
	return ctx.Err()
}

// release gives a slot back: to the first waiter, else to the pool.
func (p *slotPool) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case len(p.held) > 0:
		p.held = handOver(p.held)
	case len(p.loops) > 0:
		p.loops = handOver(p.loops)
	default:
		p.free++
		if p.room != nil {
			close(p.room)
			p.room = nil
		}
	}
}

// handOver gives a slot to the first waiter of q and returns the rest.
func handOver(q []chan struct{}) []chan struct{} {
	q[0] <- struct{}{}
	return slices.Delete(q, 0, 1)
}

// roomFree is closed once a slot is free (already, if one is).
func (p *slotPool) roomFree() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.free > 0 {
		return p.open
	}
	if p.room == nil {
		p.room = make(chan struct{})
	}
	return p.room
}

// available is the number of free slots at this moment.
func (p *slotPool) available() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.free
}
