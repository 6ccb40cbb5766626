package watchdog

import (
	"context"
	"errors"
	"time"
)

// Call is the watchdog of one call. Its methods are safe to call from the
// goroutine that reads the stream; Stop must be called once the call ends.
type Call struct {
	ctx     context.Context
	cancel  context.CancelCauseFunc
	release context.CancelFunc
	idle    time.Duration
	timer   *time.Timer
	timeout time.Duration
}

// Start derives the call's context from parent. timeout applies only when
// parent has no deadline; idle (when > 0) limits every wait that follows a
// call to Touch. Both are disabled by a value <= 0.
func Start(parent context.Context, timeout, idle time.Duration) (context.Context, *Call) {
	c := &Call{idle: idle}
	ctx := parent
	if _, ok := parent.Deadline(); !ok && timeout > 0 {
		ctx, c.release = context.WithTimeoutCause(parent, timeout, ErrCallTimeout)
		c.timeout = timeout
	}
	ctx, c.cancel = context.WithCancelCause(ctx)
	c.ctx = ctx
	if idle > 0 {
		c.timer = time.AfterFunc(idle, func() { c.cancel(ErrIdleTimeout) })
	}
	return ctx, c
}

// Touch restarts the idle limit: call it right before waiting for the next
// event, so the time spent handling events does not count as idle.
func (c *Call) Touch() {
	if c.timer != nil {
		c.timer.Reset(c.idle)
	}
}

// Idle is the configured idle limit.
func (c *Call) Idle() time.Duration { return c.idle }

// Timeout is the deadline the watchdog applied to the whole call, or 0 when
// the caller's context already had one.
func (c *Call) Timeout() time.Duration { return c.timeout }

// Stop releases the timer and the derived contexts.
func (c *Call) Stop() {
	if c.timer != nil {
		c.timer.Stop()
	}
	c.cancel(context.Canceled)
	if c.release != nil {
		c.release()
	}
}

// Cause reports why the call's context ended when the watchdog ended it
// (ErrIdleTimeout or ErrCallTimeout), else nil: a nil result with a done
// context means the caller's own context ended.
func (c *Call) Cause() error {
	if c.ctx.Err() == nil {
		return nil
	}
	cause := context.Cause(c.ctx)
	if errors.Is(cause, ErrIdleTimeout) || errors.Is(cause, ErrCallTimeout) {
		return cause
	}
	return nil
}
