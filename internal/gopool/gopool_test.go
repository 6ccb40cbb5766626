package gopool

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestPoolReusesIdleGoroutines: a function handed to the pool while one of
// its goroutines is idle runs on that goroutine (no new one is started),
// functions run concurrently when none is idle, and Close waits for them.
func TestPoolReusesIdleGoroutines(t *testing.T) {
	p := New(time.Minute)
	done := make(chan struct{})
	p.Go(func() { close(done) })
	<-done
	// The goroutine is idle now (or about to be): the next function finds it.
	require.Eventually(t, func() bool {
		ran := make(chan struct{})
		select {
		case p.work <- func() { close(ran) }:
			<-ran
			return true
		default:
			return false
		}
	}, 10*time.Second, time.Millisecond, "the finished goroutine never waited for more work")

	var running, peak atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		p.Go(func() {
			defer wg.Done()
			n := running.Add(1)
			for {
				m := peak.Load()
				if n <= m || peak.CompareAndSwap(m, n) {
					break
				}
			}
			<-release
			running.Add(-1)
		})
	}
	require.Eventually(t, func() bool { return peak.Load() == 8 }, 10*time.Second, time.Millisecond,
		"8 blocked functions did not all run at once (peak %d)", peak.Load())
	close(release)
	wg.Wait()
	p.Close()
	ran := make(chan struct{})
	p.Go(func() { close(ran) }) // after Close: still runs
	<-ran
}

// TestPoolIdleGoroutinesEnd: a goroutine with no work for the idle time
// ends by itself.
func TestPoolIdleGoroutinesEnd(t *testing.T) {
	p := New(20 * time.Millisecond)
	done := make(chan struct{})
	p.Go(func() { close(done) })
	<-done
	ended := make(chan struct{})
	go func() { p.wg.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("an idle goroutine was still waiting after 10s (idle time 20ms)")
	}
}

// TestPoolGoDuringClose: functions handed to the pool while it closes
// all run, and Close waits for those it started (no WaitGroup misuse under
// -race).
func TestPoolGoDuringClose(t *testing.T) {
	for range 50 {
		p := New(time.Minute)
		var ran atomic.Int32
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 20 {
					p.Go(func() { ran.Add(1) })
				}
			})
		}
		p.Close()
		wg.Wait()
		require.Eventually(t, func() bool { return ran.Load() == 80 }, 10*time.Second, time.Millisecond,
			"%d of 80 functions ran", ran.Load())
	}
}
