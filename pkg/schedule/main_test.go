package schedule_test

import (
	"testing"

	"github.com/lovia-fleet/lovia/internal/leaktest"
)

func TestMain(m *testing.M) {
	// The server's wait for a stream source's consumer (the runs stream
	// sources the fires) can outlive a test server by up to 30 s.
	leaktest.VerifyTestMain(m)
}
