package store

import (
	"testing"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/storetest"
)

// The conformance suites of pkg/loop/storetest against the JetStream
// stores, one embedded server per subtest. A 64 KiB chunk size makes the
// large-value tests go through chunking with many chunks.

func TestCheckpointerConformance(t *testing.T) {
	t.Parallel()
	storetest.RunCheckpointer(t, func(t *testing.T) loop.Checkpointer {
		_, st := newStore(t, Config{ChunkSize: 64 << 10})
		return st.Checkpointer()
	})
}

func TestSessionConformance(t *testing.T) {
	t.Parallel()
	storetest.RunSession(t, func(t *testing.T) loop.Session {
		_, st := newStore(t, Config{ChunkSize: 64 << 10})
		return st.Session()
	})
}

func TestMailboxConformance(t *testing.T) {
	t.Parallel()
	storetest.RunMailbox(t, func(t *testing.T) (loop.Mailbox, func(*testing.T) loop.Mailbox) {
		srv, st := newStore(t, Config{ChunkSize: 64 << 10})
		const run = "run-1"
		mb, err := st.Mailbox(run)
		if err != nil {
			t.Fatal(err)
		}
		return mb, func(t *testing.T) loop.Mailbox {
			other, err := srv.open(t).Mailbox(run)
			if err != nil {
				t.Fatal(err)
			}
			return other
		}
	})
}
