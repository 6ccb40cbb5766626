package schedule_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The server's wait for a stream source's consumer (the runs stream
	// sources the fires) can outlive a test server by up to 30 s.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*stream).trySetupSourceConsumer.func3"))
}
