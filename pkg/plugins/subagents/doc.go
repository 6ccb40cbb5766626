// Package subagents is the Subagents plugin: the model starts background
// children that are runs of the fleet.
//
// # Children are fleet runs
//
// spawn_subagent(agent, task) submits a run of agent with task as its
// input and returns at once with the child's run id. The child has its own
// run id, events subject, status and checkpoints, so any worker claims it,
// it survives the crash of the parent's worker, and it can be tailed,
// approved and cancelled like any run. Its request's metadata names the
// parent ("parent_run_id", "parent_agent").
//
// # The run tree
//
// Parent and child name each other on the wire, so a UI can draw the
// tree: the parent's tool_call_completed event for spawn_subagent carries
// a [Spawned] result ({run_id, agent, events_subject}), and the child's
// run_started event and status reply carry parent_run_id. The child's run
// id is derived from the parent's run id and the call id ([ChildRunID]):
// a spawn the parent runs again after a crash submits the same run, never
// a second child.
//
// # Reports re-enter through the mailbox
//
// When a child ends, its report — the output, or the error — is injected
// into the parent run's mailbox as a <subagent_report> message, folded in
// at the parent's next turn; it is never a late tool result.
// wait_subagents(run_ids) blocks until the children have ended and their
// reports are in the mailbox. send_to_subagent(run_id, message) steers a
// child, cancel_subagent(run_id) cancels one. Only the run's own children
// are reachable.
//
// The worker running the parent watches its children, until the parent
// ends or is released there. After a resume on another worker, that worker
// watches the children whose report the transcript does not hold yet (at
// the parent's next model call or wait_subagents), so a report is
// delivered even when the parent's first worker died.
//
// # Each report exactly once
//
// A report is injected with the idempotency key [ReportKey]
// ("subagent:<child_run_id>"), so the parent's mailbox stores it once
// however many watchers deliver it — the dead worker's just before it
// died and its successor's, or one delivery retried — and a report the
// parent already folded in is not queued again. The loop checkpoints a
// folded message before it deletes it from the mailbox and skips, on a
// resume, the messages its transcript already holds, so a crash between
// the two does not fold it twice either.
//
// # Shutdown
//
// At the end of a run here the loop closes the plugin ([Plugin.Close]):
// the watchers of the runs that ended — interrupted by a stopping worker,
// or cancelled — are stopped and waited for, so a worker's Stop, which
// waits for its runs, leaves no watcher of them behind. [Plugin.Stop] stops
// every watcher, for a process that uses the plugin outside a worker.
//
// From the agents file:
//
//	plugins:
//	  subagents: {agents: [researcher, coder], max_wait: 10m}
package subagents
