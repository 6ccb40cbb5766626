package runindex_test

import (
	"fmt"
	"time"

	"github.com/lovia-fleet/lovia/pkg/runindex"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// An index fed by hand (a Feed feeds it from the run index bucket):
// newest first, counts by status, and a cursor to the next page.
func Example() {
	x := runindex.New()
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for i, st := range []store.RunStatus{store.RunCompleted, store.RunFailed, store.RunRunning} {
		x.Apply(store.RunChange{Kind: store.ChangeRecord, RunID: fmt.Sprintf("run-%d", i), Record: &store.RunRecord{
			RunID: fmt.Sprintf("run-%d", i), Agent: "support", Status: st, CreatedAt: at.Add(time.Duration(i) * time.Minute),
		}})
	}
	page, _ := x.Query(runindex.Query{Agent: "support", Limit: 2}, at)
	for _, r := range page.Runs {
		fmt.Println(r.Record.RunID, r.Record.Status)
	}
	fmt.Println("counts:", page.Counts[store.RunCompleted], page.Counts[store.RunFailed], page.Counts[store.RunRunning])
	next, _ := x.Query(runindex.Query{Agent: "support", Limit: 2, Cursor: page.Next}, at)
	fmt.Println("next page:", next.Runs[0].Record.RunID, "last:", next.Next == "")
	// Output:
	// run-2 running
	// run-1 failed
	// counts: 1 1 1
	// next page: run-0 last: true
}
