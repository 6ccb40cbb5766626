package bus

import (
	"context"
	"time"
)

// withDefaultTimeout returns ctx unchanged when it has a deadline, else a
// child that ends after d. Every network call of this package goes through
// it, so none waits forever.
func withDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok || d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}
