package toolsvc_test

import (
	"os"
	"testing"

	"github.com/lovia-fleet/lovia/internal/leaktest"
)

func TestMain(m *testing.M) {
	// The kill test re-executes this binary as a caller process.
	if os.Getenv(callerEnv) != "" {
		os.Exit(callerMain())
	}
	leaktest.VerifyTestMain(m)
}
