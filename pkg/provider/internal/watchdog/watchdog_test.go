package watchdog_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/lovia-fleet/lovia/pkg/provider/internal/watchdog"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestWatchdog(t *testing.T) {
	t.Parallel()

	t.Run("idle_limit_ends_the_call", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			ctx, call := watchdog.Start(context.Background(), time.Hour, time.Minute)
			defer call.Stop()
			start := time.Now()
			<-ctx.Done()
			require.Equal(t, time.Minute, time.Since(start))
			require.ErrorIs(t, call.Cause(), watchdog.ErrIdleTimeout)
		})
	})

	t.Run("touch_restarts_the_idle_limit", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			ctx, call := watchdog.Start(context.Background(), 0, time.Minute)
			defer call.Stop()
			for range 5 {
				time.Sleep(50 * time.Second)
				call.Touch()
			}
			require.NoError(t, ctx.Err(), "250s passed but never a minute without a touch")
			time.Sleep(time.Minute)
			synctest.Wait()
			require.ErrorIs(t, call.Cause(), watchdog.ErrIdleTimeout)
		})
	})

	t.Run("call_timeout_only_without_a_caller_deadline", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			ctx, call := watchdog.Start(context.Background(), 10*time.Minute, 0)
			defer call.Stop()
			<-ctx.Done()
			require.ErrorIs(t, call.Cause(), watchdog.ErrCallTimeout)
			require.Equal(t, 10*time.Minute, call.Timeout())

			parent, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			_, call2 := watchdog.Start(parent, 10*time.Minute, 0)
			defer call2.Stop()
			require.Zero(t, call2.Timeout(), "the caller's deadline wins")
		})
	})

	t.Run("caller_cancellation_is_not_a_watchdog_cause", func(t *testing.T) {
		t.Parallel()
		parent, cancel := context.WithCancel(context.Background())
		ctx, call := watchdog.Start(parent, time.Hour, time.Hour)
		defer call.Stop()
		cancel()
		<-ctx.Done()
		require.NoError(t, call.Cause())
	})

	t.Run("stop_releases_the_call", func(t *testing.T) {
		t.Parallel()
		ctx, call := watchdog.Start(context.Background(), time.Hour, time.Hour)
		call.Stop()
		require.Error(t, ctx.Err())
		require.NoError(t, call.Cause())
	})
}
