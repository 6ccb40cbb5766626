package subagents_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The fleet test's server may still be waiting on a stream source's
// consumer (nats-server's own timer) when the package ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*stream).trySetupSourceConsumer.func3"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"))
}
