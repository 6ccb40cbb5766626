package resultstoretest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop/compaction"
)

// NewStore returns a fresh, empty store for one subtest.
type NewStore func(t *testing.T) compaction.ResultStore

// Run runs the ResultStore conformance suite.
func Run(t *testing.T, newStore NewStore) {
	t.Helper()
	ctx := func(t *testing.T) context.Context {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t.Cleanup(cancel)
		return c
	}
	setup := func(t *testing.T) compaction.ResultStore {
		t.Helper()
		t.Parallel()
		return newStore(t)
	}

	t.Run("PutThenGet", func(t *testing.T) {
		s := setup(t)
		out := strings.Repeat("full output\n", 1000)
		key := compaction.Digest(out)
		require.NoError(t, s.Put(ctx(t), key, out))
		got, ok, err := s.Get(ctx(t), key)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, out, got)
	})

	t.Run("MissingKey", func(t *testing.T) {
		s := setup(t)
		got, ok, err := s.Get(ctx(t), compaction.Digest("never stored"))
		require.NoError(t, err)
		require.False(t, ok)
		require.Empty(t, got)
	})

	t.Run("PutAgainIsHarmless", func(t *testing.T) {
		s := setup(t)
		key := compaction.Digest("x")
		require.NoError(t, s.Put(ctx(t), key, "x"))
		require.NoError(t, s.Put(ctx(t), key, "x"))
		got, ok, err := s.Get(ctx(t), key)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "x", got)
	})

	t.Run("EmptyAndUnicodeContent", func(t *testing.T) {
		s := setup(t)
		for _, out := range []string{"", "héllo wörld — ✓", strings.Repeat("ü", 70_000)} {
			key := compaction.Digest(out)
			require.NoError(t, s.Put(ctx(t), key, out))
			got, ok, err := s.Get(ctx(t), key)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, out, got)
		}
	})

	t.Run("KeysAreIndependent", func(t *testing.T) {
		s := setup(t)
		for i := range 20 {
			out := fmt.Sprintf("output %d", i)
			require.NoError(t, s.Put(ctx(t), compaction.Digest(out), out))
		}
		for i := range 20 {
			out := fmt.Sprintf("output %d", i)
			got, ok, err := s.Get(ctx(t), compaction.Digest(out))
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, out, got)
		}
	})

	t.Run("ConcurrentUse", func(t *testing.T) {
		s := setup(t)
		c := ctx(t)
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for g := range 16 {
			wg.Go(func() {
				for i := range 8 {
					out := fmt.Sprintf("worker %d item %d", g, i%3)
					key := compaction.Digest(out)
					if err := s.Put(c, key, out); err != nil {
						errs <- err
						return
					}
					got, ok, err := s.Get(c, key)
					if err != nil || !ok || got != out {
						errs <- fmt.Errorf("get %s: %q %v %v", key, got, ok, err)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	})

	t.Run("CancelledContext", func(t *testing.T) {
		s := setup(t)
		c, cancel := context.WithCancel(context.Background())
		cancel()
		require.ErrorIs(t, s.Put(c, compaction.Digest("y"), "y"), context.Canceled)
		_, _, err := s.Get(c, compaction.Digest("y"))
		require.ErrorIs(t, err, context.Canceled)
	})
}
