package archtest

import (
	"strings"
	"testing"
)

// The checker itself: a violation is reported with the shortest chain
// that reaches it, the search stops at the first forbidden package, and a
// direct rule ignores what imports import.
func TestViolations(t *testing.T) {
	t.Parallel()
	listing := `
{"ImportPath": "` + module + `/pkg/a", "Imports": ["` + module + `/pkg/b", "fmt"]}
{"ImportPath": "` + module + `/pkg/b", "Imports": ["` + module + `/pkg/c"]}
{"ImportPath": "` + module + `/pkg/c", "Imports": ["github.com/nats-io/nats.go"]}
{"ImportPath": "github.com/nats-io/nats.go", "Imports": ["github.com/nats-io/nkeys"]}
{"ImportPath": "github.com/nats-io/nkeys"}
{"ImportPath": "fmt", "Standard": true}
`
	g, err := decodeGraph(strings.NewReader(listing))
	if err != nil {
		t.Fatal(err)
	}
	nats := prefix("github.com/nats-io/")

	got := g.violations(module+"/pkg/a", nats, false)
	if len(got) != 1 || formatChain(got[0]) != "pkg/a -> pkg/b -> pkg/c -> github.com/nats-io/nats.go" {
		t.Fatalf("transitive: got %q, want one chain pkg/a -> pkg/b -> pkg/c -> github.com/nats-io/nats.go", got)
	}
	if got := g.violations(module+"/pkg/a", nats, true); len(got) != 0 {
		t.Fatalf("direct: pkg/a imports no NATS package itself, got %q", got)
	}
	if got := g.violations(module+"/pkg/c", nats, true); len(got) != 1 {
		t.Fatalf("direct: pkg/c imports nats.go, got %q", got)
	}
	if got := g.roots(under("pkg")); len(got) != 3 {
		t.Fatalf("roots under pkg: got %q, want pkg/a, pkg/b, pkg/c", got)
	}
	if under("pkg/a")(module+"/pkg/ab") || !under("pkg/a")(module+"/pkg/a/x") {
		t.Fatal("under must match a package and its sub-packages only")
	}
}
