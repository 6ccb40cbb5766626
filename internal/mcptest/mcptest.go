// Package mcptest locates the MCP servers the tests run against: the npm
// packages @modelcontextprotocol/server-everything and server-filesystem,
// pinned in test/mcp-servers and installed by `make npm-deps`
// (scripts/npm-deps.sh). A test that needs them fails, never skips, when
// they are missing.
package mcptest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/lovia-fleet/lovia/pkg/tools/mcp"
)

// Root returns the repository root (the directory holding go.mod).
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("mcptest: no go.mod above the test's directory")
		}
		dir = parent
	}
}

// Script returns the entry point of an installed npm MCP server package
// ("server-everything", "server-filesystem").
func Script(t testing.TB, pkg string) string {
	t.Helper()
	p := filepath.Join(Root(t), "test", "mcp-servers", "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("MCP test server %s is not installed (%v): run `make npm-deps` (scripts/npm-deps.sh)", pkg, err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not on PATH: install Node.js 20 or later to run the MCP server tests")
	}
	return p
}

// Everything is the stdio declaration of @modelcontextprotocol/server-everything.
func Everything(t testing.TB) mcp.Server {
	return mcp.Server{Command: "node", Args: []string{Script(t, "server-everything"), "stdio"}}
}

// Filesystem is the stdio declaration of
// @modelcontextprotocol/server-filesystem confined to dir.
func Filesystem(t testing.TB, dir string) mcp.Server {
	return mcp.Server{Command: "node", Args: []string{Script(t, "server-filesystem"), dir}}
}

// Processes returns the ids of the running processes whose environment
// holds the entry env ("NAME=value"): tag a server's Env with a unique
// value to count the processes started for it.
func Processes(t testing.TB, env string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		if slices.ContainsFunc(bytes.Split(b, []byte{0}), func(v []byte) bool { return string(v) == env }) {
			out = append(out, pid)
		}
	}
	return out
}
