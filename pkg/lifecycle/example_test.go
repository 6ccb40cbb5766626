package lifecycle_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/lovia-fleet/lovia/pkg/lifecycle"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// A run's life as the API and a worker drive it: submit, claim, a second
// worker's claim refused while the first holds it, release, claim by the
// second, finish.
func Example() {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	r := lifecycle.Submit(lifecycle.Submission{RunID: "r1", Agent: "support"})
	r, _ = lifecycle.RecordRequest(r, 10)
	fmt.Println(r.Status)

	r, a, _ := lifecycle.ClaimRun(r, lifecycle.Claim{Worker: "w1", Seq: 10, Submission: 1, Now: now})
	fmt.Println(r.Status, r.Worker, a.Attempt)

	_, _, err := lifecycle.ClaimRun(r, lifecycle.Claim{Worker: "w2", Seq: 10, Submission: 1, Now: now})
	fmt.Println(errors.Is(err, lifecycle.ErrHeld))

	r, _ = lifecycle.Release(r, lifecycle.Holder{Worker: "w1", Attempt: a.Attempt})
	r, b, _ := lifecycle.ClaimRun(r, lifecycle.Claim{Worker: "w2", Seq: 10, Submission: 1, Now: now})
	fmt.Println(r.Status, r.Worker, b.Attempt)

	r, _ = lifecycle.Finish(r, &loop.RunCompleted{Output: "done"}, now)
	fmt.Println(r.Status, r.Result)
	// Output:
	// queued
	// running w1 1
	// true
	// running w2 2
	// completed done
}

// Decide and Settle are the worker's two decisions about a delivery.
func ExampleDecide() {
	fmt.Println(lifecycle.Decide(lifecycle.Delivery{FirstClaim: true}).Action)
	fmt.Println(lifecycle.Decide(lifecycle.Delivery{Published: true, LastTerminal: true}).Action)
	fmt.Println(lifecycle.Settle(lifecycle.Outcome{Started: true, Terminal: true}).Settle)
	fmt.Println(lifecycle.Settle(lifecycle.Outcome{Started: true, Failed: true, Interrupted: true}).Settle)
	// Output:
	// run
	// ack-ended
	// ack
	// nak
}
