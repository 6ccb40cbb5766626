package archtest

import (
	"strings"
	"testing"
)

// rule forbids the packages that roots selects to import what forbidden
// selects: directly when direct, else through any chain of imports.
type rule struct {
	name      string
	roots     match
	forbidden match
	direct    bool
	why       string
}

func TestImports(t *testing.T) {
	t.Parallel()
	g := loadGraph(t)

	nats := prefix("github.com/nats-io/")
	natsServer := prefix("github.com/nats-io/nats-server")
	std := func(path string) bool { return g[path] != nil && g[path].Standard }
	// A test helper: the fleet and MCP harnesses, the module's *test
	// packages (conformance suites, fakes), and the testing libraries.
	helper := anyOf(
		is("internal/fleettest"), is("internal/mcptest"),
		func(path string) bool {
			return strings.HasPrefix(path, module+"/") && strings.HasSuffix(path, "test")
		},
		prefix("testing"), prefix("net/http/httptest"),
		prefix("github.com/stretchr/testify"), prefix("go.uber.org/goleak"),
	)

	rules := []rule{
		{
			name: "loop never imports NATS", roots: under("pkg/loop"), forbidden: nats,
			why: "the loop runs in process with no network at all; NATS belongs in pkg/bus and pkg/store",
		},
		{
			name: "providers never import NATS", roots: under("pkg/provider"), forbidden: nats,
			why: "model adapters know nothing of the fleet",
		},
		{
			name: "bus and client never link nats-server", roots: anyOf(is("pkg/bus"), is("pkg/client")), forbidden: natsServer,
			why: "a program that only talks to a fleet must not carry a broker; the embedded server is pkg/broker",
		},
		{
			name: "client never imports service or worker", roots: is("pkg/client"), forbidden: anyOf(is("pkg/service"), is("pkg/worker")),
			why: "the SDK speaks the wire contract (pkg/bus), not the server side's internals",
		},
		{
			name: "worker never imports service", roots: is("pkg/worker"), forbidden: is("pkg/service"),
			why: "the worker and the API service share the run lifecycle through a package of their own, not through each other",
		},
		{
			name:      "production code never links test helpers",
			roots:     allOf(anyOf(under("pkg"), under("cmd"), is("internal/cli")), not(helper)),
			forbidden: helper,
			why:       "test helpers must not be reachable from the SDK or the binaries",
		},
		{
			name: "cmd imports only internal/cli and the standard library", roots: under("cmd"),
			forbidden: not(anyOf(std, is("internal/cli"))), direct: true,
			why: "mains parse flags, build config and set the exit code; commands live in internal/cli",
		},
	}
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			roots := g.roots(r.roots)
			if len(roots) == 0 {
				t.Fatalf("the rule selects no package of the module: the layout changed, so update the rule")
			}
			for _, root := range roots {
				for _, c := range g.violations(root, r.forbidden, r.direct) {
					t.Errorf("%s imports %s: %s (%s)", short(root), short(c[len(c)-1]), formatChain(c), r.why)
				}
			}
		})
	}
}
