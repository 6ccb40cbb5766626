// Package archtest holds the tests that keep the layering a user of the
// SDK can feel: which packages may import which. It has no code of its
// own; imports_test.go loads the module's import graph with `go list
// -deps -json` and checks each rule as a named subtest, failing with the
// import chain that breaks it.
//
// # Rules
//
//   - pkg/loop and its sub-packages never import NATS: the loop runs in
//     process with no network at all.
//   - pkg/provider/... never imports NATS: model adapters know nothing of
//     the fleet.
//   - pkg/bus and pkg/client never link nats-server: a program that only
//     talks to a fleet does not carry a broker (that is pkg/broker).
//   - pkg/client never imports pkg/service or pkg/worker, and pkg/worker
//     never imports pkg/service: the SDK and the worker speak the wire
//     contract, not each other's internals.
//   - Production code (pkg/..., cmd/..., internal/cli) never links test
//     helpers: internal/fleettest, internal/mcptest, the *test conformance
//     packages, testing, testify, goleak or httptest.
//   - cmd/* import only internal/cli and the standard library: mains parse
//     flags and set the exit code, commands live in internal/cli.
package archtest
