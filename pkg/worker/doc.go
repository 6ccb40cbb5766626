// Package worker is the stateless worker of Lovia Fleet. A [Worker] claims
// runs from the RUNS work-queue stream through the shared durable pull
// consumer, executes each with the agent loop against the JetStream stores,
// and publishes every event to the run's subject.
//
// # Lifecycle
//
// [New] validates a [Config] and starts nothing; [Worker.Start] provisions
// streams and buckets, binds the stores and starts the claim loop; [Worker.Stop]
// stops claiming, lets runs finish within the grace period, then interrupts
// the rest at a checkpoint and releases them to another worker.
//
// # Crashes and resume
//
// A run's claim is kept alive with ack-progress heartbeats. When a worker
// dies the server redelivers the run; the next worker loads the checkpoint,
// publishes run_resumed (and output_discarded when a turn was in flight),
// continues the event sequence where the stream ends, never re-runs a
// checkpointed tool call and re-runs the dangling ones. A worker that lost
// its claim is fenced at its next checkpoint write and publishes nothing
// more for that run.
//
// # Approvals
//
// A gated call waits for a decision stored through the API. A wait longer
// than [Config.ParkAfter] parks the run: it stops at its checkpoint, its
// record keeps the request that resumes it, and its claim is acknowledged,
// so a decision that takes hours holds no slot and no claim. The API wakes
// a parked run when a decision or a cancel arrives ([lifecycle.WakeRun]); every
// worker watches the park timers and wakes runs at their approval deadline,
// which counts from the first ask and survives parks and takeovers.
package worker
