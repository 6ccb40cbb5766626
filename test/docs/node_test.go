package docs_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// minNode is the Node.js major version the README and scripts/npm-deps.sh
// ask for.
const minNode = 20

// nodeLocks are the npm lock files make npm-deps installs from.
var nodeLocks = []string{"test/mcp-servers/package-lock.json", "examples/tool-service-node/package-lock.json"}

var rangeRE = regexp.MustCompile(`(>=|<=|>|<|\^|~|=)?\s*v?(\d+)(?:\.[0-9xX*]+)*`)

// admitsMajor reports whether an npm version range (alternatives joined by
// ||, each a list of comparators) admits some version of the given major.
func admitsMajor(r string, major int) bool {
	for alt := range strings.SplitSeq(r, "||") {
		ok := true
		for _, m := range rangeRE.FindAllStringSubmatch(alt, -1) {
			n, _ := strconv.Atoi(m[2])
			switch m[1] {
			case ">=":
				ok = ok && n <= major
			case ">":
				ok = ok && n <= major // >20.1 still admits a 20
			case "<":
				ok = ok && n > major
			case "<=":
				ok = ok && n >= major
			default: // ^N, ~N, =N, N, N.x
				ok = ok && n == major
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// TestNodeVersionFloor checks that every package the npm lock files pin
// runs on the Node.js the docs ask for (an engines.node floor above it is
// an EBADENGINE warning at npm ci, and a package that may not work), and
// that the README and npm-deps.sh ask for that version.
func TestNodeVersionFloor(t *testing.T) {
	t.Parallel()
	want := fmt.Sprintf("Node.js %d or later", minNode)
	for _, f := range []string{"README.md", "scripts/npm-deps.sh"} {
		data, err := os.ReadFile(filepath.Join(repoRoot, f))
		require.NoError(t, err)
		require.Contains(t, string(data), want, "%s names the Node.js version the lock files are checked against", f)
	}
	var bad []string
	for _, lock := range nodeLocks {
		bad = append(bad, nodeFloors(t, lock)...)
	}
	if len(bad) > 0 {
		t.Fatalf("packages that need a newer Node.js than the %s the docs ask for: pin versions that run on it, or raise it in README.md and scripts/npm-deps.sh\n%s", want, strings.Join(bad, "\n"))
	}
}

// nodeFloors returns the packages of a lock file whose engines.node asks
// for a Node.js newer than minNode.
func nodeFloors(t *testing.T, lock string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, lock))
	require.NoError(t, err)
	var l struct {
		Packages map[string]struct {
			Version string          `json:"version"`
			Engines json.RawMessage `json:"engines"`
		} `json:"packages"`
	}
	require.NoError(t, json.Unmarshal(data, &l), lock)
	require.NotEmpty(t, l.Packages, "%s lists no packages", lock)
	var bad []string
	for name, p := range l.Packages {
		var engines struct {
			Node string `json:"node"`
		}
		if json.Unmarshal(p.Engines, &engines) != nil || engines.Node == "" {
			continue // none, or the old array form
		}
		if !admitsMajor(engines.Node, minNode) {
			bad = append(bad, fmt.Sprintf("%s: %s@%s needs node %q", lock, strings.TrimPrefix(name, "node_modules/"), p.Version, engines.Node))
		}
	}
	return bad
}

// TestNodeVersionFloorCatchesANewerFloor: the lock file the Node tool
// service had (testdata: transport-node 3.4.0 brought @nats-io/nuid 3.0.0,
// node >= 22.x) is reported.
func TestNodeVersionFloorCatchesANewerFloor(t *testing.T) {
	t.Parallel()
	bad := nodeFloors(t, "test/docs/testdata/package-lock-node22.json")
	require.Equal(t, []string{`test/docs/testdata/package-lock-node22.json: @nats-io/transport-node/node_modules/@nats-io/nuid@3.0.0 needs node ">= 22.x"`}, bad)
}
