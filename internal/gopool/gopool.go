// Package gopool runs functions on goroutines that outlive them for a
// while, waiting for the next function.
//
// A new goroutine starts on a small stack and grows it, by copying, as
// deep calls need: a fleet run (worker → loop → sink → publisher →
// nats.go) or an API request grows its goroutine's stack several times,
// which showed as about 4 % of a busy fleet's CPU. A goroutine kept from
// one function to the next keeps its grown stack — until a garbage
// collection finds it idle on it and shrinks it (the runtime halves a stack
// a quarter used), after which the next deep call copies a deep stack
// again. So each function starts on a stack grown at once to stackDepth,
// while the stack holds almost nothing and the growth copies almost
// nothing.
package gopool

import (
	"sync"
	"time"
)

// Pool hands functions to its idle goroutines, or starts one when none is
// idle. A goroutine idle for the pool's idle time ends. The zero value is
// not usable; see New.
type Pool struct {
	work chan func()
	quit chan struct{}
	idle time.Duration
	wg   sync.WaitGroup
	// mu orders starting a goroutine (wg.Add) against Close (wg.Wait).
	mu     sync.Mutex
	closed bool
}

// New returns a pool whose goroutines end after idle without work.
func New(idle time.Duration) *Pool {
	return &Pool{work: make(chan func()), quit: make(chan struct{}), idle: idle}
}

// Go runs f on one of the pool's goroutines. After Close it runs f on a
// goroutine of its own, which Close does not wait for.
func (p *Pool) Go(f func()) {
	select {
	case p.work <- f:
		return
	default:
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		go f()
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	go p.loop(f)
}

func (p *Pool) loop(f func()) {
	defer p.wg.Done()
	t := time.NewTimer(p.idle)
	defer t.Stop()
	for {
		growStack()
		f()
		t.Reset(p.idle)
		select {
		case f = <-p.work:
		case <-t.C:
			return
		case <-p.quit:
			return
		}
	}
}

// Close ends the idle goroutines and waits for the running functions to
// return.
func (p *Pool) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.quit)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// stackDepth is how much stack growStack makes room for: more than a
// fleet run's deepest calls need (checkpoint encoding under the loop, the
// worker and the store: about 20 KB).
const stackDepth = 24 << 10

// growStack grows the goroutine's stack to hold stackDepth more bytes, in
// one copy of what it holds now.
//
//go:noinline
func growStack() {
	var frame [stackDepth]byte
	use(&frame)
}

// use keeps frame on the stack (it does not escape) and in the frame
// (the compiler cannot drop an array whose address is passed on).
//
//go:noinline
func use(frame *[stackDepth]byte) { frame[0] = 0 }
