// Package lifecycle is the run lifecycle of Lovia Fleet, written down: the
// states of a run, every transition between them as a pure function over
// the run's record in the index ([store.RunRecord]) that returns the next
// record or a typed [*Refusal], and the two decisions a worker makes about
// a delivered run request — what to do with it ([Decide]) and how to settle
// its JetStream message once the run is over ([Settle]).
//
// The API (pkg/service) and the worker (pkg/worker) only call these
// functions, inside a compare-and-set on the record (store.Runs.Modify);
// I/O — KV writes, publishes, acks — happens around them, never inside.
//
// # States
//
//	submit ─▶ queued ─ claim ─▶ running ─ park ─▶ parked
//	            ▲ ▲ ▲              │ │ │             │
//	            │ │ └── release ───┘ │ │             │
//	            │ └───── wake ───────┼─┼─────────────┘
//	            │                    │ └─ finish ─▶ completed ─┐
//	            │                    └─── finish ─▶ failed ────┤
//	            └──────────────────── resubmit ────────────────┘
//
// Requeue (a lost request published again) keeps a run queued; reject and
// abandon fail a queued (or, abandon, a running) run; repair finishes a
// running one from its stored terminal event; a cancel of a run no worker
// holds (queued or parked) fails it at once ([CancelUnheld]), and every
// request of that submission is stale from then on.
//
// A run is queued until a worker claims it, running while a worker holds
// it, parked while it waits for an approval decision on no worker, and
// completed or failed once its terminal event is out. Reject and abandon
// fail a run that cannot run (an invalid request; a run no worker holds
// whose request is gone); repair and heal settle a record that missed an
// outcome its events or checkpoint already hold.
//
// # The table
//
// Every state × transition pair, as TestTransitionTable checks it (the
// fixture: submission 1, held by w1 under the request at seq 10; "!" is a
// refusal; the claims are w2's after it found w1 gone, except "held"):
//
//	transition       queued      running     parked      completed   failed
//	resubmit         !NotEnded   !NotEnded   !NotEnded   queued      queued
//	record-request   queued      !NotQueued  !NotQueued  !NotQueued  !NotQueued
//	requeue          queued      !NotQueued  !NotQueued  !NotQueued  !NotQueued
//	claim (own seq)  running     running     running     running     running
//	claim (held)     running     !Held       running     running     running
//	claim (other)    running     !InFlight   !InFlight   !Stale      !Stale
//	claim (raw)      running     !InFlight   !InFlight   running     running
//	claim (older)    !Stale      !Stale      !Stale      !Stale      !Stale
//	claim (wake)     running     !InFlight   running     !Stale      !Stale
//	park (holder)    !NotHolder  parked      !NotHolder  !NotHolder  !NotHolder
//	park (other)     !NotHolder  !NotHolder  !NotHolder  !NotHolder  !NotHolder
//	wake             !NotParked  !NotParked  queued      !NotParked  !NotParked
//	release (holder) !NotHolder  queued      !NotHolder  !NotHolder  !NotHolder
//	release (other)  !NotHolder  !NotHolder  !NotHolder  !NotHolder  !NotHolder
//	finish completed completed   completed   completed   completed   completed
//	finish failed    failed      failed      failed      !Ended      failed
//	reject           !InFlight   !InFlight   !InFlight   !Ended      !Ended
//	repair           !NotStuck   completed   !NotStuck   !NotStuck   !NotStuck
//	abandon          failed      failed      !NotStuck   !NotStuck   !NotStuck
//	cancel (unheld)  failed      !Held       failed      !Ended      !Ended
//
// The fixture's queued run has run before (attempt 1, a release): another
// request's reject leaves it to its own request; a run never claimed, or
// queued for the bad request itself, is rejected. A reject records the
// bad request, so the submission's other copies (the API's requeue) are
// stale; a bad copy older than the request the record names, or of an
// earlier submission, is refused with ErrStale and leaves the run alone.
//
// A claim of a completed or failed run by its own request is a redelivery
// after the terminal event: [Decide] acknowledges or heals it before any
// claim is tried.
//
// # History
//
// Every transition that changes a run appends a step to the record's
// history ([store.RunRecord.Attempts], the last [store.MaxAttempts]):
// submit, resubmit, requeue, claim (a submission's first), resume (after a
// release or a wake), takeover (of a holder found gone), park, wake,
// release, and the outcome (complete, fail, reject, abandon, repair,
// heal, cancel). Claims and outcomes carry their time; the others are stamped by
// the write of the record (store.Runs.Update). Describe shows it.
//
// # The invariant
//
// Every accepted submission ends with exactly one terminal event and a
// terminal status. The transitions keep the record honest; the fleet's
// watchers (the worker's takeover reaper and its sweep of runs no worker
// holds) make sure no run stays queued or running for good.
package lifecycle
