package runindex_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/runindex"
	"github.com/lovia-fleet/lovia/pkg/store"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func rec(id string, created time.Time, st store.RunStatus, mod ...func(*store.RunRecord)) store.RunChange {
	r := &store.RunRecord{RunID: id, Agent: "a", Status: st, CreatedAt: created, UpdatedAt: created, Submissions: 1}
	for _, m := range mod {
		m(r)
	}
	return store.RunChange{Kind: store.ChangeRecord, RunID: id, Record: r}
}

func ids(p runindex.Page) []string {
	out := []string{}
	for _, r := range p.Runs {
		out = append(out, r.Record.RunID)
	}
	return out
}

func TestIndex(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T) *runindex.Index {
		x := runindex.New()
		x.Apply(rec("r1", t0, store.RunCompleted))
		x.Apply(rec("r2", t0.Add(time.Second), store.RunFailed, func(r *store.RunRecord) { r.Agent = "b"; r.SessionID = "s1" }))
		x.Apply(rec("r3", t0.Add(2*time.Second), store.RunRunning, func(r *store.RunRecord) { r.Worker = "w1"; r.SessionID = "s1" }))
		x.Apply(rec("r4", t0.Add(2*time.Second), store.RunQueued, func(r *store.RunRecord) { r.ParentRunID = "r3" })) // same time as r3: by id
		x.Apply(rec("r5", t0.Add(3*time.Second), store.RunParked, func(r *store.RunRecord) {
			r.Worker = "w1"
			r.Parked = &store.Parking{CallID: "c9", Deadline: t0.Add(time.Hour)}
		}))
		return x
	}

	t.Run("newest first, ties by run id, counts by status", func(t *testing.T) {
		t.Parallel()
		p, err := setup(t).Query(runindex.Query{Limit: 10}, t0)
		require.NoError(t, err)
		require.Equal(t, []string{"r5", "r4", "r3", "r2", "r1"}, ids(p))
		require.Empty(t, p.Next)
		require.Equal(t, map[store.RunStatus]int{"queued": 1, "running": 1, "parked": 1, "completed": 1, "failed": 1}, p.Counts)
	})

	t.Run("filters combine; counts ignore the status filter", func(t *testing.T) {
		t.Parallel()
		x := setup(t)
		for _, tc := range []struct {
			q    runindex.Query
			want []string
			n    int // total of the counts
		}{
			{runindex.Query{Agent: "b"}, []string{"r2"}, 1},
			{runindex.Query{Agent: "a", Statuses: []store.RunStatus{store.RunRunning, store.RunParked}}, []string{"r5", "r3"}, 4},
			{runindex.Query{Session: "s1", Statuses: []store.RunStatus{store.RunRunning}}, []string{"r3"}, 2},
			{runindex.Query{Worker: "w1"}, []string{"r5", "r3"}, 2},
			{runindex.Query{Parent: "r3"}, []string{"r4"}, 1},
			{runindex.Query{Since: t0.Add(time.Second), Until: t0.Add(3 * time.Second)}, []string{"r4", "r3", "r2"}, 3},
			{runindex.Query{Statuses: []store.RunStatus{store.RunCompleted}}, []string{"r1"}, 5},
			{runindex.Query{Statuses: []store.RunStatus{store.RunCompleted}, Until: t0}, []string{}, 0},
			{runindex.Query{Agent: "nobody"}, []string{}, 0},
			{runindex.Query{Agent: "b", Session: "s1", Worker: "w1"}, []string{}, 0},
		} {
			tc.q.Limit = 10
			p, err := x.Query(tc.q, t0)
			require.NoError(t, err)
			require.Equal(t, tc.want, ids(p), "%+v", tc.q)
			n := 0
			for _, c := range p.Counts {
				n += c
			}
			require.Equal(t, tc.n, n, "counts of %+v: %v", tc.q, p.Counts)
		}
	})

	t.Run("pages follow each other without gaps or repeats while runs arrive", func(t *testing.T) {
		t.Parallel()
		x := runindex.New()
		for i := range 95 {
			x.Apply(rec(fmt.Sprintf("r%03d", i), t0.Add(time.Duration(i/3)*time.Second), store.RunCompleted))
		}
		created := func(id string) time.Time {
			var i int
			_, _ = fmt.Sscanf(id, "r%03d", &i)
			return t0.Add(time.Duration(i/3) * time.Second)
		}
		for _, q := range []runindex.Query{{}, {Agent: "a"}, {Statuses: []store.RunStatus{store.RunCompleted}}} {
			var got []string
			q.Limit = 10
			for pages := 0; ; pages++ {
				require.Less(t, pages, 20)
				p, err := x.Query(q, t0)
				require.NoError(t, err)
				got = append(got, ids(p)...)
				// A new run between pages lands before the first page.
				x.Apply(rec(fmt.Sprintf("new%d-%d", len(q.Statuses), pages), t0.Add(time.Hour), store.RunRunning, func(r *store.RunRecord) { r.Agent = "z" }))
				if p.Next == "" {
					break
				}
				q.Cursor = p.Next
			}
			want := make([]string, 95)
			for i := range want {
				want[i] = fmt.Sprintf("r%03d", i)
			}
			slices.SortFunc(want, func(a, b string) int { // newest first: by created, then run id
				if c := created(b).Compare(created(a)); c != 0 {
					return c
				}
				return strings.Compare(b, a)
			})
			require.Equal(t, want, got, "%+v", q)
		}
	})

	t.Run("a bad cursor is refused", func(t *testing.T) {
		t.Parallel()
		_, err := setup(t).Query(runindex.Query{Cursor: "not-a-cursor"}, t0)
		require.True(t, errors.Is(err, runindex.ErrBadCursor), "%v", err)
	})

	t.Run("status changes move a run between the status sets", func(t *testing.T) {
		t.Parallel()
		x := setup(t)
		x.Apply(rec("r3", t0.Add(2*time.Second), store.RunCompleted, func(r *store.RunRecord) { r.Worker = "w2" }))
		p, err := x.Query(runindex.Query{Statuses: []store.RunStatus{store.RunCompleted}, Limit: 10}, t0)
		require.NoError(t, err)
		require.Equal(t, []string{"r3", "r1"}, ids(p))
		require.Equal(t, 0, p.Counts[store.RunRunning])
		p, err = x.Query(runindex.Query{Worker: "w1", Limit: 10}, t0)
		require.NoError(t, err)
		require.Equal(t, []string{"r5"}, ids(p))
		x.Apply(store.RunChange{Kind: store.ChangeRecord, RunID: "r5", Deleted: true})
		require.Equal(t, 4, x.Len())
	})

	t.Run("awaiting: parked, or running with an undecided wait before its deadline", func(t *testing.T) {
		t.Parallel()
		x := setup(t)
		q := runindex.Query{Awaiting: true, Limit: 10}
		p, err := x.Query(q, t0)
		require.NoError(t, err)
		require.Equal(t, []string{"r5"}, ids(p))
		require.Equal(t, &runindex.Await{CallKey: "c9", CallID: "c9", Deadline: t0.Add(time.Hour), Parked: true}, p.Runs[0].Awaiting)

		// r3 begins to wait on call c1 (the worker stores its deadline).
		x.Apply(store.RunChange{Kind: store.ChangeAsk, RunID: "r3", CallKey: "c1", CallID: "c1", Deadline: t0.Add(time.Minute), Submission: 1})
		x.SetCallInfo("r3", "c1", "ask_human", "which colour?")
		p, err = x.Query(q, t0)
		require.NoError(t, err)
		require.Equal(t, []string{"r5", "r3"}, ids(p))
		require.Equal(t, &runindex.Await{CallKey: "c1", CallID: "c1", Deadline: t0.Add(time.Minute), Tool: "ask_human", Question: "which colour?"}, p.Runs[1].Awaiting)
		r, ok := x.Get("r3", t0)
		require.True(t, ok)
		require.NotNil(t, r.Awaiting)

		// Past its deadline the wait is over (the worker denies the call).
		p, err = x.Query(q, t0.Add(2*time.Minute))
		require.NoError(t, err)
		require.Equal(t, []string{"r5"}, ids(p))

		// A decision ends it; so does an ask of an earlier submission.
		x.Apply(store.RunChange{Kind: store.ChangeDecision, RunID: "r3", CallKey: "c1", CallID: "c1", Submission: 1})
		p, err = x.Query(q, t0)
		require.NoError(t, err)
		require.Equal(t, []string{"r5"}, ids(p))
		x.Apply(store.RunChange{Kind: store.ChangeAsk, RunID: "r3", CallKey: "c2", CallID: "c2", Deadline: t0.Add(time.Minute), Submission: 0})
		p, err = x.Query(q, t0)
		require.NoError(t, err)
		require.Equal(t, []string{"r5"}, ids(p))
		require.Equal(t, map[store.RunStatus]int{"queued": 0, "running": 0, "parked": 1, "completed": 0, "failed": 0}, p.Counts)
	})
}

// FuzzQueryCursor: whatever a client sends as a cursor, a query answers a
// page or ErrBadCursor, never a panic.
func FuzzQueryCursor(f *testing.F) {
	x := runindex.New()
	for i := range 20 {
		x.Apply(rec(fmt.Sprintf("r%02d", i), t0.Add(time.Duration(i%7)*time.Second), store.RunCompleted))
	}
	p, _ := x.Query(runindex.Query{Limit: 3}, t0)
	f.Add(p.Next)
	f.Add("")
	f.Add("djEuMC4")
	f.Add("djEuLTEuYQ") // v1.-1.a
	f.Add("%%%")
	f.Fuzz(func(t *testing.T, cursor string) {
		for _, q := range []runindex.Query{{Cursor: cursor, Limit: 5}, {Cursor: cursor, Limit: 5, Agent: "a"}, {Cursor: cursor, Limit: 5, Statuses: []store.RunStatus{store.RunCompleted}}} {
			p, err := x.Query(q, t0)
			if err != nil && !errors.Is(err, runindex.ErrBadCursor) {
				t.Fatalf("cursor %q: %v", cursor, err)
			}
			if len(p.Runs) > 5 {
				t.Fatalf("cursor %q: a page of %d", cursor, len(p.Runs))
			}
		}
	})
}
