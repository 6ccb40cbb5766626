package compaction_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop/compaction"
	"github.com/lovia-fleet/lovia/pkg/loop/compaction/resultstoretest"
)

func TestMemoryStore(t *testing.T) {
	t.Parallel()
	resultstoretest.Run(t, func(*testing.T) compaction.ResultStore { return compaction.NewMemoryStore(0) })

	t.Run("EvictsTheLeastRecentlyUsed", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		s := compaction.NewMemoryStore(3)
		for i := range 3 {
			require.NoError(t, s.Put(ctx, fmt.Sprint(i), fmt.Sprint("v", i)))
		}
		_, ok, _ := s.Get(ctx, "0") // 0 is now the most recent
		require.True(t, ok)
		require.NoError(t, s.Put(ctx, "3", "v3"))
		require.Equal(t, 3, s.Len())
		_, ok, _ = s.Get(ctx, "1")
		require.False(t, ok, "1 was the least recently used")
		for _, k := range []string{"0", "2", "3"} {
			_, ok, _ = s.Get(ctx, k)
			require.True(t, ok, k)
		}
		require.NoError(t, s.Put(ctx, "2", "again")) // refresh, no growth
		require.Equal(t, 3, s.Len())
	})

	t.Run("DefaultBound", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		s := compaction.NewMemoryStore(0)
		for i := range compaction.DefaultMemoryStoreKeys + 10 {
			require.NoError(t, s.Put(ctx, fmt.Sprint(i), "v"))
		}
		require.Equal(t, compaction.DefaultMemoryStoreKeys, s.Len())
	})
}
