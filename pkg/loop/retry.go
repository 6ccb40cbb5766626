package loop

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// RetryPolicy retries failed model calls. MaxAttempts counts calls (1 = no
// retry). The wait before attempt k+1 is min(MaxDelay, BaseDelay·2^(k-1))
// times a uniform jitter in [0.5, 1.5), and at least the endpoint's
// Retry-After. An attempt that failed after streaming output restarts the
// turn (OutputDiscarded) unless NoRestartOnPartial is set.
type RetryPolicy struct {
	MaxAttempts        int
	BaseDelay          time.Duration
	MaxDelay           time.Duration
	NoRestartOnPartial bool
	// Retryable classifies errors (nil: retryable ProviderErrors only,
	// including those of unknown retryability).
	Retryable func(error) bool
	// Sleep waits between attempts (nil: a timer honouring ctx). Tests
	// inject it.
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter returns a value in [0, 1) (nil: math/rand/v2).
	Jitter func() float64
}

// DefaultRetryPolicy is 5 attempts, 1 s base, doubling, 30 s cap.
func DefaultRetryPolicy() *RetryPolicy {
	return &RetryPolicy{MaxAttempts: 5, BaseDelay: time.Second, MaxDelay: 30 * time.Second}
}

// defaultRetry is the policy of runs that set none (never modified).
var defaultRetry = RetryPolicy{MaxAttempts: 5, BaseDelay: time.Second, MaxDelay: 30 * time.Second}

// NoRetry makes one attempt.
func NoRetry() *RetryPolicy { return &RetryPolicy{MaxAttempts: 1} }

func (p *RetryPolicy) attempts() int {
	if p == nil || p.MaxAttempts < 1 {
		return 1
	}
	return p.MaxAttempts
}

func (p *RetryPolicy) retryable(err error) bool {
	if errors.Is(err, ErrContextOverflow) || errors.Is(err, ErrCancelled) {
		return false
	}
	if p.Retryable != nil {
		return p.Retryable(err)
	}
	var pe *ProviderError
	return errors.As(err, &pe) && pe.IsRetryable()
}

func (p *RetryPolicy) delay(attempt int, err error) time.Duration {
	d := p.BaseDelay
	for i := 1; i < attempt && d < p.MaxDelay; i++ {
		d *= 2
	}
	if p.MaxDelay > 0 && d > p.MaxDelay {
		d = p.MaxDelay
	}
	j := rand.Float64
	if p.Jitter != nil {
		j = p.Jitter
	}
	d = time.Duration(float64(d) * (0.5 + j()))
	var pe *ProviderError
	if errors.As(err, &pe) && pe.RetryAfter > d {
		d = pe.RetryAfter
	}
	return d
}

func (p *RetryPolicy) sleep(ctx context.Context, d time.Duration) error {
	if p.Sleep != nil {
		return p.Sleep(ctx, d)
	}
	return sleepCtx(ctx, d)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
