// Package worker is the stateless worker of Lovia Fleet. A [Worker] claims
// runs from the RUNS work-queue stream through the shared durable pull
// consumer, executes each with the agent loop against the JetStream stores,
// and publishes every event to the run's subject.
//
// # Lifecycle
//
// [New] validates a [Config] and starts nothing; [Worker.Start] provisions
// streams and buckets, binds the stores and starts a claim loop per agent;
// [Worker.Stop]
// stops claiming, lets runs finish within the grace period, then interrupts
// the rest at a checkpoint and releases them to another worker.
//
// # Routing by agent
//
// Every agent has its own consumer on the runs work queue (agent-<name>,
// filtered on its submit subject; bus.ProvisionAgents): a worker fetches
// only from the consumers of the agents it serves, so workers of one fleet
// may serve different agents files, and a run whose agent no live worker
// serves waits, queued. Workers announce themselves and their agents in the
// fleet registry (pkg/fleet), which the API reads to accept submits and
// explain queued runs. With [Config.Agents] (the agents registry,
// pkg/registry) the served agents change while the worker runs, and a run
// resumes with the agents of the registry revision it is pinned to — also
// after the registry removed its agent: a worker keeps claiming from a
// removed agent's consumer while it holds requests, resumes the runs in
// flight from their pinned revision, and ends those that never started
// with run_failed UnknownAgent.
//
// # The lifecycle
//
// A delivery is register → claim → run → settle: what to do with it
// (lifecycle.Decide), the claim transition, the loop, then how to settle
// its message (lifecycle.Settle), with one function doing every ack, nak
// and term. Every change of the run record is a transition of
// pkg/lifecycle. A claim of a run another worker holds is refused until
// the holder, asked over its presence subject, says it no longer holds it
// or has left the fleet: a redelivery after a NATS restart never runs a
// run twice.
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
// Each claim records the worker's version of the run's agent
// (catalog.VersionOf with [Config.BuildID]): a run started on one version
// whose resume is claimed by a worker of another is given back while a
// live worker of its version has room, unless [Config.ResumeAnyVersion]
// (docs/protocol.md#agent-versions).
//
// # Approvals
//
// A gated call waits for a decision stored through the API. A wait longer
// than [Config.ParkAfter] parks the run: it stops at its checkpoint, its
// record keeps the request that resumes it, and its claim is acknowledged,
// so a decision that takes hours holds no slot and no claim. The API wakes
// a parked run when a decision arrives ([lifecycle.WakeRun]) and ends it
// on a cancel ([lifecycle.CancelUnheld]); every
// worker watches the park timers and wakes runs at their approval deadline,
// which counts from the first ask and survives parks and takeovers.
package worker
