// Package leaktest checks a test binary for leaked goroutines (goleak),
// ignoring the goroutines the NATS libraries leave behind on their own.
package leaktest

import (
	"testing"

	"go.uber.org/goleak"
)

// natsIgnores are goroutines the NATS libraries leave running, through no
// fault of the code under test:
//   - nats.go's async-publish reconnect watcher blocks for ever on a nil
//     channel when the publisher is cleaned up before the goroutine first
//     reads its channel (jetstream/publish.go, resetPendingAcksOnReconnect);
//   - nats-server's retry timer for a stream source's consumer outlives
//     the server's shutdown for a moment.
var natsIgnores = []goleak.Option{
	goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"),
	goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*stream).trySetupSourceConsumer.func3"),
}

// VerifyTestMain runs the tests, then fails the binary if goroutines
// other than the NATS libraries' own (and those opts ignore) are left.
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	goleak.VerifyTestMain(m, append(append([]goleak.Option(nil), natsIgnores...), opts...)...)
}

// Find reports the goroutines left running, but for the NATS libraries'
// own (and those opts ignore), for a TestMain that does more than
// VerifyTestMain.
func Find(opts ...goleak.Option) error {
	return goleak.Find(append(append([]goleak.Option(nil), natsIgnores...), opts...)...)
}
