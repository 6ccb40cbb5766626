package storetest_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The suites check themselves against the in-memory stores, so a change to a
// suite that no correct store can pass fails here, next to the suite.
func TestSuitesAgainstMemoryStores(t *testing.T) {
	t.Run("Checkpointer", func(t *testing.T) {
		storetest.RunCheckpointer(t, func(*testing.T) loop.Checkpointer { return loop.NewMemoryCheckpointer() })
	})
	t.Run("Session", func(t *testing.T) {
		storetest.RunSession(t, func(*testing.T) loop.Session { return loop.NewMemorySession() })
	})
	t.Run("Mailbox", func(t *testing.T) {
		storetest.RunMailbox(t, func(*testing.T) (loop.Mailbox, func(*testing.T) loop.Mailbox) {
			mb := loop.NewMemoryMailbox()
			return mb, func(*testing.T) loop.Mailbox { return mb }
		})
	})
}
