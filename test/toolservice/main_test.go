// Package toolservice_test runs the Node.js tool service of
// examples/tool-service-node against a fleet: a worker on an embedded NATS
// server whose agent calls the Node tool and answers from its result.
package toolservice_test

import (
	"testing"

	"github.com/lovia-fleet/lovia/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }
