package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWritesKeepTheCallersDeadline: the deadline rule (Config.Timeout
// bounds a call whose context has no deadline) holds for writes too, which
// bound their wait without deriving a context: a caller's deadline, even
// one far past Timeout, is the only bound of a write; a context without
// one gets Timeout.
func TestWritesKeepTheCallersDeadline(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cfg := srv.cfg
	cfg.Timeout = time.Nanosecond // every call without a deadline times out
	cfg.OutageBudget = -1         // and is not retried
	st, err := Open(ctx, srv.connect(t), cfg)
	require.NoError(t, err)

	_, err = st.Runs().Create(ctx, RunRecord{RunID: "r1", Agent: "a"})
	require.NoError(t, err, "a write under the caller's deadline was cut at Timeout")
	_, err = st.Runs().Create(context.Background(), RunRecord{RunID: "r2", Agent: "a"})
	require.ErrorIs(t, err, ErrTimeout, "a write without a deadline was not bounded by Timeout")
}
