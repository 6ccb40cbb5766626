package bus

import (
	"math/rand/v2"
	"time"
)

// Backoff of the retries of transient failures: the first wait, and the
// cap the doubling stops at.
const (
	backoffFirst = 50 * time.Millisecond
	backoffMax   = 2 * time.Second
)

// backoff is a jittered exponential backoff: each wait is 50–100% of a
// value that doubles from backoffFirst up to backoffMax, so that the runs
// of a fleet do not retry in step after a leader election.
type backoff struct{ next time.Duration }

// wait returns the next pause.
func (b *backoff) wait() time.Duration {
	if b.next == 0 {
		b.next = backoffFirst
	}
	d := b.next/2 + rand.N(b.next/2+1)
	b.next = min(2*b.next, backoffMax)
	return d
}
