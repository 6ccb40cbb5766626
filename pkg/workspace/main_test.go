package workspace_test

import (
	"testing"

	"github.com/lovia-fleet/lovia/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }
