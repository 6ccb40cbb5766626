package toolsvc_test

import (
	"os"
	"testing"

	"github.com/lovia-fleet/lovia/internal/leaktest"
)

func TestMain(m *testing.M) {
	// The kill tests re-execute this binary as a caller or a service process.
	if os.Getenv(callerEnv) != "" {
		os.Exit(callerMain())
	}
	if os.Getenv(serviceEnv) != "" {
		os.Exit(serviceMain())
	}
	leaktest.VerifyTestMain(m)
}
