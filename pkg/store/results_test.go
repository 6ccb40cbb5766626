package store

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop/compaction"
	"github.com/lovia-fleet/lovia/pkg/loop/compaction/resultstoretest"
)

func TestResultStoreConformance(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	resultstoretest.Run(t, func(t *testing.T) compaction.ResultStore {
		rs, err := OpenResultStore(context.Background(), srv.connect(t), ResultStoreConfig{})
		require.NoError(t, err)
		return rs
	})
}

func TestResultStoreSharedAndLarge(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	ctx := context.Background()
	a, err := OpenResultStore(ctx, srv.connect(t), ResultStoreConfig{})
	require.NoError(t, err)
	b, err := OpenResultStore(ctx, srv.connect(t), ResultStoreConfig{})
	require.NoError(t, err)
	big := strings.Repeat("0123456789", 500_000) // 5 MB, past the max payload
	key := compaction.Digest(big)
	require.NoError(t, a.Put(ctx, key, big))
	got, ok, err := b.Get(ctx, key)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, big, got)
	_, ok, err = b.Get(ctx, "missing")
	require.NoError(t, err)
	require.False(t, ok)
}
