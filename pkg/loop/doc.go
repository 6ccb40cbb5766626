// Package loop is the agent runtime of Lovia Fleet: it executes one run of
// an agent in process, with no network of its own, following lovia's
// semantics, which this page describes.
//
// # Concepts
//
// An [Agent] is immutable configuration: instructions, a model, tools,
// handoffs, plugins, guardrails and hooks. A [Runner] executes runs:
// [Runner.Run] returns a [RunResult]; [Runner.Stream] returns a [RunHandle]
// whose events are the catalog of [Event] types. Tools are built with
// [NewTool] from a Go function whose input struct defines the JSON Schema.
//
// # Persistence
//
// The transcript is an append-only list of [Entry] values. A [Checkpointer]
// stores a run in flight (entries appended after every model turn and tool
// result, plus a small [RunHead]); a [Session] stores completed runs as
// segments; a [Mailbox] queues steering messages. In-memory implementations
// live in this package; pkg/store implements them over JetStream.
//
// A store that fails with an error matching [ErrUnavailable] (an outage
// that outlasted its own retries) interrupts the run instead of failing
// it: no terminal event and no terminal checkpoint, so that the last
// checkpoint stays resumable, and the handle's Result returns the store's
// error. [ErrFenced] stops a run the same way.
package loop
