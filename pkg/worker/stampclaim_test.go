package worker_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// recordReads counts the reads of run records the server receives, by run
// id (direct gets and leader gets of <run>.rec in the runs bucket, whether
// they name the key in their subject or their body).
type recordReads struct {
	mu sync.Mutex
	by map[string]int
}

func spyRecordReads(t *testing.T, f *fleettest.Fleet) (*recordReads, *nats.Conn) {
	t.Helper()
	spy := f.Connect()
	r := &recordReads{by: map[string]int{}}
	for _, subj := range []string{"$JS.API.DIRECT.GET.>", "$JS.API.STREAM.MSG.GET.>"} {
		_, err := spy.Subscribe(subj, func(m *nats.Msg) {
			s := m.Subject + " " + string(m.Data)
			i := strings.Index(s, "lovia_runs.")
			if i < 0 {
				return
			}
			key := s[i+len("lovia_runs."):]
			if run, ok := strings.CutSuffix(strings.FieldsFunc(key, func(c rune) bool { return c == '"' || c == ' ' })[0], ".rec"); ok {
				r.mu.Lock()
				r.by[run]++
				r.mu.Unlock()
			}
		})
		require.NoError(t, err)
	}
	require.NoError(t, spy.Flush())
	return r, spy
}

func (r *recordReads) of(run string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.by[run]
}

// TestStampedClaimKeepsTheSubmittedRecord (issue 16): the claim of a first
// request rebuilds the run's record from the request and the stamp the API
// sent with it (bus.HeaderRecord) instead of reading it — for a run with a
// session, metadata and a parent run, submitted as JSON and as msgpack —
// and the record it writes keeps every field of the one the API stored.
func TestStampedClaimKeepsTheSubmittedRecord(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents, Workers: -1})
	ctx := context.Background()
	mp, err := client.New(f.Conn, client.Options{Encoding: bus.Msgpack})
	require.NoError(t, err)
	meta := map[string]any{bus.MetaParentRunID: "run-parent-1", "n": 3, "big": 300, "f": 1.5,
		"tags": []any{"a", 2, true}, "nested": map[string]any{"k": "v"}}
	var runs []string
	submitted := map[string]store.RunRecord{}
	for i, c := range []*client.Client{f.Client, mp} {
		rep, err := c.Submit(ctx, &bus.RunRequest{Agent: "quick", SessionID: "sess-" + string(rune('a'+i)), Metadata: meta, Input: bus.TextInput("hi")})
		require.NoError(t, err)
		e, err := f.Store.Runs().Get(ctx, rep.RunID)
		require.NoError(t, err)
		runs = append(runs, rep.RunID)
		submitted[rep.RunID] = e.Record
	}

	reads, spy := spyRecordReads(t, f)
	f.StartWorker(workerConfig(t, f, "w1"))
	for _, run := range runs {
		envs := f.Events(run, 15*time.Second)
		require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type, "run %s: types %v", run, fleettest.Types(envs))
	}
	require.NoError(t, spy.Flush())
	for _, run := range runs {
		require.Zero(t, reads.of(run), "run %s: its claim (or its run) read its record", run)
		e, err := f.Store.Runs().Get(ctx, run)
		require.NoError(t, err)
		want, got := submitted[run], e.Record
		require.Equal(t, store.RunCompleted, got.Status)
		require.Equal(t, 1, got.Attempt, "run %s: claimed once", run)
		require.Equal(t, want.RunID, got.RunID)
		require.Equal(t, want.Agent, got.Agent)
		require.Equal(t, want.SessionID, got.SessionID)
		require.Equal(t, "run-parent-1", got.ParentRunID)
		require.Equal(t, want.Metadata, got.Metadata, "run %s: metadata", run)
		require.Equal(t, want.Submissions, got.Submissions)
		require.True(t, want.CreatedAt.Equal(got.CreatedAt), "run %s: created %v, then %v", run, want.CreatedAt, got.CreatedAt)
		require.False(t, got.Quiet, "run %s: the claim left the record quiet", run)
		require.NotZero(t, got.RequestSeq, "run %s: the claim recorded no request sequence", run)
		require.Greater(t, len(got.Attempts), len(want.Attempts), "run %s: no step added", run)
		for i, a := range want.Attempts {
			b := got.Attempts[i]
			require.True(t, a.At.Equal(b.At), "run %s: step %d at %v, then %v", run, i, a.At, b.At)
			a.At, b.At = time.Time{}, time.Time{}
			require.Equal(t, a, b, "run %s: step %d", run, i)
		}
	}
}
