// Package storetest holds the conformance suites for the persistence
// interfaces of package loop: [loop.Checkpointer], [loop.Session] and
// [loop.Mailbox]. Every implementation runs the same suite, so the in-memory
// stores of package loop and the JetStream stores of pkg/store are held to
// one contract (the pattern of Watermill's pubsub tests and River's driver
// tests).
//
// # Use
//
// Call a suite from a test with a constructor that returns a fresh, empty
// store for one subtest; register any cleanup with t.Cleanup inside it:
//
//	func TestCheckpointer(t *testing.T) {
//		storetest.RunCheckpointer(t, func(t *testing.T) loop.Checkpointer {
//			return loop.NewMemoryCheckpointer()
//		})
//	}
//
// [RunMailbox] takes a constructor that also returns a reopen function: it
// must return another handle on the same queue (for a networked store, a new
// connection), which the suite uses for persistence and concurrent-drainer
// tests.
//
// # Behaviours
//
// Each behaviour is one named subtest, so a failure names what broke, and
// subtests run with t.Parallel. The suites cover, for checkpoints: append and
// load order, head replacement, empty appends, [loop.ErrNoSnapshot],
// idempotent Delete, fencing by revision (a stale writer is refused and
// nothing it wrote is visible; two writers creating one run: exactly one
// wins), Base mismatches, a 5 MB tool output and copy isolation. For
// sessions: insertion order, idempotent append by run id, generated run ids,
// Clear, every Rewind case of lovia's session contract and TrimToolResults.
// For mailboxes: FIFO, Remove by token, destructive Drain under concurrent
// drainers, and push after drain.
//
// Values that go through an encoder (a head's Output and ContextState, a
// segment's Meta) are compared by their JSON encoding, since a store may hand
// back int64 where int went in; times are compared with time.Time.Equal.
package storetest
