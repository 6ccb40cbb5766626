// Package store implements the persistence interfaces of package loop —
// [loop.Checkpointer], [loop.Session] and [loop.Mailbox] — and the fleet's
// run index on NATS JetStream key-value buckets, so that any worker can pick
// up any run where another left it.
//
// # Use
//
// Provision the buckets once ([EnsureBuckets] is idempotent and leaves
// existing buckets alone), then [Open] a [Store] per process and share it:
//
//	if err := store.EnsureBuckets(ctx, js, store.Config{}); err != nil { … }
//	st, err := store.Open(ctx, js, store.Config{})
//	runner.Run(ctx, agent, input,
//		loop.WithCheckpoint(st.Checkpointer(), runID))
//
// [Config] names the buckets (lovia_checkpoints, lovia_sessions,
// lovia_mailbox and lovia_runs by default) and sets the per-call timeout,
// chunk size and value cap; every field documents its default.
//
// # Bounded cost
//
// A checkpoint append writes one message, a segment key holding the new
// entries and the head after them; a session append writes one segment
// key. Neither rewrites
// what is stored, so a write costs the same at turn 200 as at turn 2
// (BenchmarkCheckpointAppend). Values are msgpack. A value larger than one
// message (the server's max payload, 1 MiB by default) is split over chunk
// keys next to it and reassembled on read, checked by length and CRC-32C;
// tool outputs of several megabytes round-trip without configuration.
//
// # Fencing and idempotency
//
// [Checkpointer.Append] is a compare-and-set on the revision of the run's
// last segment (JetStream's expected last sequence for the subject filter of
// the run's segments; none when the writer saw none). A worker that lost its
// run gets an error matching [loop.ErrFenced] and writes nothing. (Runs
// stored by earlier releases, a head key and batch keys, are continued in
// that layout: a compare-and-set on the head, batches chained backwards
// from it.) Session appends are creates keyed by run id (the first write wins).
// Mailbox pushes are creates keyed by token; a drain deletes each message
// conditionally on the revision it read, so concurrent drainers never share
// a message; FIFO follows the server's revision order. [Mailbox.PushKey]
// derives the token from an idempotency key, and a consumed keyed message
// leaves a spent record, so one key queues one message per run, ever.
//
// # Cleanup
//
// Every key of a run or session begins with its id, and removal is one
// subject purge of the id's keys: [Checkpointer.Delete], [Session.Clear],
// [Mailbox.Clear] and [Runs.Delete] remove chunks, and chunks or batches
// orphaned by fenced or crashed writers, along with the data. A fenced
// writer's chunks (and, in the earlier layout, batch) are purged at once
// when the refusal is certain; what a crash leaves stays until that id's
// purge.
//
// # Errors and deadlines
//
// Errors name the operation and id and wrap a sentinel of errors.go (or
// loop's) and the NATS error, so both match with errors.Is:
//
//	store: checkpoint append run-1: checkpoint fenced: another writer owns this run: nats: API error: …
//
// Every network call runs under the caller's deadline, or Config.Timeout
// when the context has none.
//
// # Outages
//
// A broker outage is not the run's fault. Timeouts, no responders, no
// response from a stream, and the API errors of a leader election or a
// cluster not formed yet are transient ([IsTransient]): every bucket call
// tries them again with jittered exponential backoff for up to
// Config.OutageBudget (2 minutes by default; cancelling the context stops
// at once). A write whose earlier attempt may have landed recognises its
// own value instead of losing the compare-and-set to it. Past the budget
// the error matches [ErrUnavailable] or [ErrTimeout], and through them
// [loop.ErrUnavailable]: the loop stops the run without a terminal event
// and the worker releases it for later. [Open], [EnsureBuckets] and
// [OpenResultStore] wait instead for a cluster that is still forming,
// until their context ends, logging each attempt on Config.Logger.
//
// # Permissions
//
// Besides puts and gets on $KV.<bucket>.>, the stores create short-lived
// ordered consumers to list a run's checkpoint segments, a session's segments and a
// mailbox's messages ($JS.API.CONSUMER.CREATE.KV_<bucket>.>), and purge
// subjects of the buckets' streams ($JS.API.STREAM.PURGE.KV_<bucket>).
package store
