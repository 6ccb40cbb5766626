package runindex_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/lifecycle"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/runindex"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// openStore starts an embedded JetStream server (random port, temp store)
// with the buckets, and opens a store on it; both stop in t.Cleanup.
func openStore(t testing.TB) *store.Store {
	t.Helper()
	emb, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = emb.Shutdown(ctx)
	})
	nc, err := emb.Connect(nats.Name(t.Name()))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, store.EnsureBuckets(ctx, js, store.Config{}))
	st, err := store.Open(ctx, js, store.Config{})
	require.NoError(t, err)
	return st
}

func startFeed(t testing.TB, st *store.Store, nc ...*nats.Conn) *runindex.Feed {
	t.Helper()
	cfg := runindex.FeedConfig{Runs: st.Runs()}
	if len(nc) > 0 {
		cfg.Conn = nc[0]
	}
	f, err := runindex.NewFeed(cfg)
	require.NoError(t, err)
	require.NoError(t, f.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, f.Stop(context.Background())) })
	return f
}

// eventually polls cond until it holds, failing after a generous deadline
// with what it waited for.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestFeed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	runs := st.Runs()
	// Runs stored before the feed starts are in the index once it is ready.
	for _, id := range []string{"old-1", "old-2"} {
		_, err := runs.Create(ctx, lifecycle.Submit(lifecycle.Submission{RunID: id, Agent: "a", Metadata: map[string]any{"parent_run_id": "p1"}}))
		require.NoError(t, err)
	}
	f := startFeed(t, st)
	x, err := f.Index(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, x.Len())
	require.Positive(t, f.BuildTime())
	p, err := x.Query(runindex.Query{Parent: "p1", Limit: 10}, time.Now())
	require.NoError(t, err)
	require.Equal(t, []string{"old-2", "old-1"}, ids(p))

	// A live run: submitted, claimed, waiting on an approval, decided,
	// completed — the index follows each step.
	_, err = runs.Create(ctx, lifecycle.Submit(lifecycle.Submission{RunID: "live", Agent: "b"}))
	require.NoError(t, err)
	status := func(want store.RunStatus) func() bool {
		return func() bool { r, ok := x.Get("live", time.Now()); return ok && r.Record.Status == want }
	}
	eventually(t, "the new run, queued", status(store.RunQueued))
	_, err = runs.Modify(ctx, "live", func(r *store.RunRecord) error {
		next, _, err := lifecycle.ClaimRun(*r, lifecycle.Claim{Worker: "w1", Seq: 1, Submission: 1, Now: time.Now()})
		*r = next
		return err
	})
	require.NoError(t, err)
	eventually(t, "the claimed run, running on w1", func() bool {
		r, ok := x.Get("live", time.Now())
		return ok && r.Record.Status == store.RunRunning && r.Record.Worker == "w1"
	})
	deadline := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	_, err = st.Control().ApprovalDeadline(ctx, "live", 1, "call 1", deadline) // a call id that is stored hex-encoded
	require.NoError(t, err)
	eventually(t, "the approval wait of call 1", func() bool {
		r, _ := x.Get("live", time.Now())
		return r.Awaiting != nil && r.Awaiting.CallID == "call 1" && r.Awaiting.Deadline.Equal(deadline)
	})
	p, err = x.Query(runindex.Query{Awaiting: true, Limit: 10}, time.Now())
	require.NoError(t, err)
	require.Equal(t, []string{"live"}, ids(p))
	_, _, err = st.Control().Decide(ctx, "live", 1, "call 1", loop.Approve, "")
	require.NoError(t, err)
	eventually(t, "the decision to end the wait", func() bool { r, _ := x.Get("live", time.Now()); return r.Awaiting == nil })
	_, err = runs.Modify(ctx, "live", lifecycle.Modify(func(r store.RunRecord) (store.RunRecord, error) {
		return lifecycle.Finish(r, &loop.RunCompleted{Output: "ok", Turns: 2, FinalAgent: "c"}, time.Now())
	}))
	require.NoError(t, err)
	eventually(t, "the completed run", status(store.RunCompleted))
	r, _ := x.Get("live", time.Now())
	require.Equal(t, 2, r.Record.Turns)
	require.Equal(t, "c", r.Record.FinalAgent)
	require.Nil(t, r.Record.Result, "the index keeps no results")
}
