package loop_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// TestDescribeCancelled: a cancelled run's error is not retryable — the
// cancel was asked for — and says how to continue it after all (issue 25,
// item 5).
func TestDescribeCancelled(t *testing.T) {
	info := loop.Describe(&loop.RunCancelled{Reason: "user pressed stop"})
	require.Equal(t, loop.ErrorInfo{Type: "RunCancelled", Message: "user pressed stop", Hint: loop.CancelledHint}, info)
	require.False(t, info.Retryable)
}
