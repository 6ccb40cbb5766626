package window

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

func TestMemo(t *testing.T) {
	ctx := context.Background()
	var m Memo
	calls := 0
	lookup := func(context.Context) (int, error) {
		calls++
		if calls == 1 {
			return 0, errors.New("down")
		}
		return 128000, nil
	}
	n, err := m.Get(ctx, 0, lookup)
	require.Error(t, err)
	require.Zero(t, n)
	n, err = m.Get(ctx, 0, lookup)
	require.NoError(t, err)
	require.Equal(t, 128000, n)
	_, _ = m.Get(ctx, 0, lookup)
	require.Equal(t, 2, calls, "a success is memoized, a failure retried")
	require.Equal(t, 4096, mustGet(t, &m, 4096), "configured wins")

	require.NoError(t, m.Observe(nil))
	_ = m.Observe(&loop.ContextOverflowError{ReportedWindow: 32000})
	_ = m.Observe(&loop.ContextOverflowError{ReportedWindow: 64000})
	require.Equal(t, 32000, mustGet(t, &m, 0), "capped by the smallest rejection")
}

func mustGet(t *testing.T, m *Memo, configured int) int {
	n, err := m.Get(context.Background(), configured, func(context.Context) (int, error) { return 128000, nil })
	require.NoError(t, err)
	return n
}
