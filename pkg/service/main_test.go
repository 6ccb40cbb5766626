package service_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"),
		// The server's wait for a stream source's consumer (the runs stream
		// sources the schedules' fires) can outlive a test server by up to 30 s.
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*stream).trySetupSourceConsumer.func3"))
}
