// Package background runs a component's one goroutine between its Start
// and its Stop: the lifecycle the schedule keeper, the run index feed and
// the retention reaper share.
package background

import (
	"context"
	"errors"
	"sync"
)

// Loop is the goroutine of a component with Start and Stop. The zero Loop
// is ready; it runs once.
type Loop struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs run in a goroutine with a context that ctx's cancellation
// does not end (ctx only bounds the start); Stop ends it. A second Start
// is an error naming what (e.g. "runindex: Feed").
func (l *Loop) Start(ctx context.Context, what string, run func(ctx context.Context)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done != nil {
		return errors.New(what + ".Start called twice")
	}
	ctx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	l.done = done
	go func() {
		defer close(done)
		run(ctx)
	}()
	return nil
}

// Stop cancels the goroutine's context and waits for it to return (or for
// ctx). Stop before Start, or twice, is no error.
func (l *Loop) Stop(ctx context.Context) error {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if done == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
