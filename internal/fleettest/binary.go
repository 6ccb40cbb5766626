package fleettest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/lovia-fleet/lovia/internal/leaktest"
)

// Binary is a program MainWithBinaries builds: the package to build (a
// path relative to the test's directory, or a module package path) and
// where to store the built binary's path.
type Binary struct {
	Pkg  string
	Path *string
}

// MainWithBinaries is a TestMain for tests that run programs (the lovia
// binary, nats-server) as processes: it builds each into a temporary
// directory, sets its Path, runs the tests, removes the binaries, checks
// for leaked goroutines (leaktest) after a passing run and exits.
func MainWithBinaries(m *testing.M, bins ...Binary) {
	dir, err := os.MkdirTemp("", "lovia-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for i, b := range bins {
		*b.Path = filepath.Join(dir, fmt.Sprintf("bin%d-%s", i, filepath.Base(b.Pkg)))
		build := exec.Command("go", "build", "-o", *b.Path, b.Pkg)
		build.Stdout, build.Stderr = os.Stdout, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building", b.Pkg+":", err)
			_ = os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := leaktest.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
