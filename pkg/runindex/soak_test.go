//go:build soak

package runindex_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// TestSoakRetention runs SOAK_N (default 200,000) short completed runs
// through the stores — a record created, a checkpoint append of one turn,
// a steering message pushed and drained, the record completed — with a
// SOAK_RETENTION (default 5s) retention, a reaper and a run index feed
// running (expiry markers kept SOAK_MARKER, default 10s), and logs every tenth of the way the bytes and messages the
// runs, checkpoints and mailbox buckets store, the runs the index holds
// and the heap: once retention applies, all of them stay flat. Then it
// waits for every run to expire. Run it with
//
//	SOAK_N=200000 go test -tags soak -run TestSoakRetention -v -timeout 3h ./pkg/runindex/
func TestSoakRetention(t *testing.T) {
	n, retention := 200_000, 5*time.Second
	if s := os.Getenv("SOAK_N"); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(t, err)
	}
	if s := os.Getenv("SOAK_RETENTION"); s != "" {
		var err error
		retention, err = time.ParseDuration(s)
		require.NoError(t, err)
	}
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
	cfg := store.Config{Retention: retention}
	require.NoError(t, store.EnsureBuckets(ctx, js, cfg))
	// Expiry markers stay 24h by default; here they go after SOAK_MARKER
	// (default 10s), so that the soak sees them go too.
	marker := 10 * time.Second
	if s := os.Getenv("SOAK_MARKER"); s != "" {
		marker, err = time.ParseDuration(s)
		require.NoError(t, err)
	}
	rs, err := js.Stream(ctx, "KV_"+store.DefaultRunBucket)
	require.NoError(t, err)
	rc := rs.CachedInfo().Config
	rc.SubjectDeleteMarkerTTL = marker
	_, err = js.UpdateStream(ctx, rc)
	require.NoError(t, err)
	st, err := store.Open(ctx, js, cfg)
	require.NoError(t, err)
	rp, err := store.NewReaper(store.ReaperConfig{Store: st})
	require.NoError(t, err)
	require.NoError(t, rp.Start(ctx))
	t.Cleanup(func() { require.NoError(t, rp.Stop(context.Background())) })
	f := startFeed(t, st)
	x, err := f.Index(ctx)
	require.NoError(t, err)

	stored := func() (bytes, msgs uint64) {
		for _, b := range []string{store.DefaultRunBucket, store.DefaultCheckpointBucket, store.DefaultMailboxBucket} {
			s, err := js.Stream(ctx, "KV_"+b)
			require.NoError(t, err)
			bytes += s.CachedInfo().State.Bytes
			msgs += s.CachedInfo().State.Msgs
		}
		return
	}
	report := func(runs int, start time.Time) {
		b, m := stored()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		t.Logf("runs %7d  elapsed %7.1fs  stored %8.1f KiB in %6d messages  index holds %6d runs  heap %6.1f MB",
			runs, time.Since(start).Seconds(), float64(b)/1024, m, x.Len(), float64(ms.HeapAlloc)/(1<<20))
	}
	entries := []loop.Entry{loop.AssistantText("thinking"), loop.ToolCallEntry("c1", "lookup", `{"q":"x"}`), loop.ToolResultEntry("c1", "lookup", "a result", false)}
	start := time.Now()
	for i := range n {
		run := fmt.Sprintf("soak-%07d", i)
		_, err := st.Runs().Create(ctx, store.RunRecord{RunID: run, Agent: "a"})
		require.NoError(t, err)
		_, err = st.Checkpointer().Append(ctx, run, loop.CheckpointWrite{Entries: entries, Head: loop.RunHead{Agent: "a", Turns: 1, Status: loop.StatusCompleted}})
		require.NoError(t, err)
		mb, err := st.Mailbox(run)
		require.NoError(t, err)
		_, err = mb.Push(ctx, loop.MailMessage{Content: "steer"})
		require.NoError(t, err)
		_, err = mb.Drain(ctx)
		require.NoError(t, err)
		_, err = st.Runs().Modify(ctx, run, func(r *store.RunRecord) error { r.Status = store.RunCompleted; return nil })
		require.NoError(t, err)
		if (i+1)%max(n/10, 1) == 0 {
			report(i+1, start)
		}
	}
	deadline := time.Now().Add(retention + marker + 2*time.Minute)
	for {
		if _, m := stored(); m == 0 && x.Len() == 0 {
			break
		}
		_, m := stored()
		require.True(t, time.Now().Before(deadline), "waited for the last runs to expire; %d messages remain, the index holds %d runs", m, x.Len())
		time.Sleep(200 * time.Millisecond)
	}
	report(n, start)
}
