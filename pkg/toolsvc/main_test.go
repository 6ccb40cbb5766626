package toolsvc_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The kill test re-executes this binary as a caller process.
	if os.Getenv(callerEnv) != "" {
		os.Exit(callerMain())
	}
	goleak.VerifyTestMain(m)
}
