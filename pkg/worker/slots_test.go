package worker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A slot given back goes to a fetched request waiting for one before any
// claim loop, each kind in arrival order; only with no one waiting does it
// become free again, and then roomFree says so.
func TestSlotPoolServesHeldRequestsFirst(t *testing.T) {
	p := newSlotPool(1)
	require.True(t, p.tryAcquire())
	require.False(t, p.tryAcquire(), "one slot, taken")
	room := p.roomFree()
	ctx := context.Background()

	order := make(chan string, 3)
	start := func(name string, held bool, waiting int) {
		go func() {
			require.NoError(t, p.acquire(ctx, held))
			order <- name
		}()
		// In line before the next one.
		require.Eventually(t, func() bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			return len(p.held)+len(p.loops) == waiting
		}, 5*time.Second, time.Millisecond, "%s never waited for a slot", name)
	}
	start("loop 1", false, 1)
	start("loop 2", false, 2)
	start("held", true, 3)
	for _, want := range []string{"held", "loop 1", "loop 2"} {
		p.release()
		select {
		case got := <-order:
			require.Equal(t, want, got)
		case <-time.After(5 * time.Second):
			t.Fatalf("a released slot reached no waiter (want %s)", want)
		}
	}
	select {
	case <-room:
		t.Fatal("room opened while waiters took every released slot")
	default:
	}
	p.release()
	select {
	case <-room:
	case <-time.After(5 * time.Second):
		t.Fatal("a slot released with no one waiting did not open the room")
	}
	require.True(t, p.tryAcquire())
}

// A wait that ends with its context leaves the line and keeps no slot: the
// next release goes to the waiter behind it or to the pool.
func TestSlotPoolAcquireEndsWithItsContext(t *testing.T) {
	p := newSlotPool(1)
	require.True(t, p.tryAcquire())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.acquire(ctx, true) }()
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.held) == 1
	}, 5*time.Second, time.Millisecond, "the acquire never waited")
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("acquire did not end with its context")
	}
	p.release()
	require.True(t, p.tryAcquire(), "the released slot went to a waiter that had left")
	require.False(t, p.tryAcquire())
}

// A slot handed to a waiter whose context ends at the same moment is given
// on, never lost: whatever the interleaving, after every waiter is done the
// pool has all its slots back.
func TestSlotPoolLosesNoSlotToACanceledWait(t *testing.T) {
	const slots = 3
	p := newSlotPool(slots)
	for range 200 {
		for range slots {
			require.True(t, p.tryAcquire())
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, slots)
		for range slots {
			go func() { done <- p.acquire(ctx, false) }()
		}
		got := 0
		go cancel()
		for range slots {
			p.release()
		}
		for range slots {
			if <-done == nil {
				got++
			}
		}
		for range got {
			p.release()
		}
		n := 0
		for p.tryAcquire() {
			n++
		}
		require.Equal(t, slots, n, "slots lost or made")
		for range n {
			p.release()
		}
	}
}
