package runindex_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lovia-fleet/lovia/pkg/lifecycle"
	"github.com/lovia-fleet/lovia/pkg/runindex"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// fleetRuns is n runs of a busy fleet: 20 agents, 10 workers, a session
// per 10 runs, a child per 10 runs; 85% completed, 7% failed, 5% running,
// 2% queued, 1% parked (each waiting on an approval).
func fleetRuns(n int) []store.RunChange {
	out := make([]store.RunChange, 0, n)
	for i := range n {
		st := store.RunCompleted
		switch m := i % 100; {
		case m < 7:
			st = store.RunFailed
		case m < 12:
			st = store.RunRunning
		case m < 14:
			st = store.RunQueued
		case m < 15:
			st = store.RunParked
		}
		created := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		c := rec(fmt.Sprintf("run-%07d", i), created, st, func(r *store.RunRecord) {
			r.Agent = fmt.Sprintf("agent-%02d", i%20)
			r.SessionID = fmt.Sprintf("session-%06d", i/10)
			r.Worker = fmt.Sprintf("worker-%d", i%10)
			if i%10 == 9 {
				r.ParentRunID = fmt.Sprintf("run-%07d", i-1)
			}
			if st == store.RunParked {
				r.Parked = &store.Parking{CallID: "c1", Deadline: created.Add(24 * time.Hour)}
			}
		})
		out = append(out, c)
	}
	return out
}

func buildIndex(changes []store.RunChange) *runindex.Index {
	x := runindex.New()
	for _, c := range changes {
		x.Apply(c)
	}
	return x
}

// BenchmarkRunsList is a listing's latency in the index at 10,000 and
// 100,000 runs: the first page of 50, unfiltered and with each filter, and
// a page deep in (cursor).
func BenchmarkRunsList(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		x := buildIndex(fleetRuns(n))
		now := t0.Add(time.Duration(n) * 10 * time.Millisecond)
		p, _ := x.Query(runindex.Query{Limit: 50}, now)
		for i := 0; i < 20 && p.Next != ""; i++ {
			p, _ = x.Query(runindex.Query{Limit: 50, Cursor: p.Next}, now)
		}
		deep := p.Next
		for _, tc := range []struct {
			name string
			q    runindex.Query
		}{
			{"all", runindex.Query{}},
			{"status=running", runindex.Query{Statuses: []store.RunStatus{store.RunRunning}}},
			{"status=queued,running", runindex.Query{Statuses: []store.RunStatus{store.RunQueued, store.RunRunning}}},
			{"agent", runindex.Query{Agent: "agent-07"}},
			{"agent+status=failed", runindex.Query{Agent: "agent-07", Statuses: []store.RunStatus{store.RunFailed}}},
			{"session", runindex.Query{Session: "session-000042"}},
			{"worker", runindex.Query{Worker: "worker-3"}},
			{"parent", runindex.Query{Parent: "run-0000008"}},
			{"awaiting", runindex.Query{Awaiting: true}},
			{"since+until", runindex.Query{Since: t0.Add(10 * time.Second), Until: t0.Add(60 * time.Second)}},
			{"page-21", runindex.Query{Cursor: deep}},
		} {
			b.Run(fmt.Sprintf("runs=%d/%s", n, tc.name), func(b *testing.B) {
				tc.q.Limit = 50
				for b.Loop() {
					if _, err := x.Query(tc.q, now); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkRunsIndexBuild is the in-memory part of building the index:
// applying n records.
func BenchmarkRunsIndexBuild(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		changes := fleetRuns(n)
		b.Run(fmt.Sprintf("runs=%d", n), func(b *testing.B) {
			for b.Loop() {
				buildIndex(changes)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/run")
		})
	}
}

// BenchmarkRunsIndexReplay is a Feed's start against a real server holding
// n run records: the watch's replay of the bucket, decoding and indexing
// each, until the index is ready.
func BenchmarkRunsIndexReplay(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("runs=%d", n), func(b *testing.B) {
			st := openStore(b)
			fill(b, st, n)
			for b.Loop() {
				f, err := runindex.NewFeed(runindex.FeedConfig{Runs: st.Runs()})
				if err != nil {
					b.Fatal(err)
				}
				if err := f.Start(context.Background()); err != nil {
					b.Fatal(err)
				}
				x, err := f.Index(context.Background())
				if err != nil || x.Len() != n {
					b.Fatalf("index of %d runs, err %v", x.Len(), err)
				}
				_ = f.Stop(context.Background())
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/run")
		})
	}
}

// fill stores n run records the way the API and workers write them.
func fill(b *testing.B, st *store.Store, n int) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				r := lifecycle.Submit(lifecycle.Submission{RunID: fmt.Sprintf("run-%07d", i), Agent: fmt.Sprintf("agent-%02d", i%20), SessionID: fmt.Sprintf("s-%d", i/10)})
				r.Status, r.Worker, r.Attempt, r.Turns = store.RunCompleted, "worker-1", 1, 3
				r.Result = "a result of a few words, as most runs have"
				if _, err := st.Runs().Create(context.Background(), r); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}
