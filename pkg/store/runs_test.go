package store

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

func TestRuns(t *testing.T) {
	t.Parallel()
	clock := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	srv := startServer(t, Config{})
	st, err := Open(t.Context(), srv.connect(t), Config{Clock: func() time.Time { return clock }})
	require.NoError(t, err)
	runs := st.Runs()

	t.Run("CreateGetUpdate", func(t *testing.T) {
		ctx := t.Context()
		e, err := runs.Create(ctx, RunRecord{RunID: "run-1", Agent: "support", SessionID: "s1", Metadata: map[string]any{"ticket": "T-1"}})
		require.NoError(t, err)
		require.Equal(t, RunQueued, e.Record.Status)
		require.Equal(t, clock, e.Record.CreatedAt)

		_, err = runs.Create(ctx, RunRecord{RunID: "run-1", Agent: "other"})
		require.ErrorIs(t, err, ErrRunExists)
		require.ErrorIs(t, err, jetstream.ErrKeyExists)

		got, err := runs.Get(ctx, "run-1")
		require.NoError(t, err)
		require.Equal(t, e.Revision, got.Revision)
		require.Equal(t, "support", got.Record.Agent)
		require.Equal(t, "T-1", got.Record.Metadata["ticket"])
		require.Equal(t, clock, got.Record.CreatedAt, "times come back in UTC")

		stale := *got
		got.Record.Status, got.Record.Worker, got.Record.Attempt = RunRunning, "w1", 1
		require.NoError(t, runs.Update(ctx, got))
		require.NotEqual(t, stale.Revision, got.Revision)

		stale.Record.Worker = "w2"
		err = runs.Update(ctx, &stale)
		require.ErrorIs(t, err, ErrConflict)
		require.ErrorIs(t, err, jetstream.ErrKeyRevisionMismatch)

		got, err = runs.Get(ctx, "run-1")
		require.NoError(t, err)
		require.Equal(t, "w1", got.Record.Worker)
	})

	t.Run("StatusReplyShape", func(t *testing.T) {
		rec := RunRecord{RunID: "r", Agent: "a", Status: RunCompleted, Attempt: 1, Turns: 2, Result: "done", CreatedAt: clock, UpdatedAt: clock}
		b, err := json.Marshal(rec)
		require.NoError(t, err)
		require.JSONEq(t, `{"run_id":"r","agent":"a","status":"completed","attempt":1,"turns":2,"result":"done",
			"created_at":"2025-06-01T12:00:00Z","updated_at":"2025-06-01T12:00:00Z"}`, string(b))
	})

	t.Run("ModifyRetriesLostCAS", func(t *testing.T) {
		ctx := t.Context()
		_, err := runs.Create(ctx, RunRecord{RunID: "run-count", Agent: "a"})
		require.NoError(t, err)
		const writers = 8
		var wg sync.WaitGroup
		errs := make([]error, writers)
		for i := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = runs.Modify(ctx, "run-count", func(r *RunRecord) error { r.Turns++; return nil })
			}()
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		got, err := runs.Get(ctx, "run-count")
		require.NoError(t, err)
		require.Equal(t, writers, got.Record.Turns)

		boom := errors.New("boom")
		_, err = runs.Modify(ctx, "run-count", func(*RunRecord) error { return boom })
		require.ErrorIs(t, err, boom)
	})

	t.Run("LargeResultAndDelete", func(t *testing.T) {
		ctx := t.Context()
		big := strings.Repeat("r", 3<<20)
		e, err := runs.Create(ctx, RunRecord{RunID: "run-big", Agent: "a"})
		require.NoError(t, err)
		e.Record.Status, e.Record.Result, e.Record.Error = RunFailed, big, &loop.ErrorInfo{Type: "UserError", Message: "x"}
		require.NoError(t, runs.Update(ctx, e))
		got, err := runs.Get(ctx, "run-big")
		require.NoError(t, err)
		require.Equal(t, big, got.Record.Result)
		require.Equal(t, "UserError", got.Record.Error.Type)

		got.Record.Result = "small"
		require.NoError(t, runs.Update(ctx, got))
		require.Empty(t, keys(t, st, st.runs.b, "run-big.x.>"), "replaced chunks are purged")

		require.NoError(t, runs.Delete(ctx, "run-big"))
		require.NoError(t, runs.Delete(ctx, "run-big"))
		_, err = runs.Get(ctx, "run-big")
		require.ErrorIs(t, err, ErrRunNotFound)
		_, err = runs.Modify(ctx, "run-big", func(*RunRecord) error { return nil })
		require.ErrorIs(t, err, ErrRunNotFound)
	})
}
