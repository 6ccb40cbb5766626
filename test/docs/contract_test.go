package docs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/gateway"
	"github.com/lovia-fleet/lovia/pkg/toolsvc"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// Placeholders the wire contract writes for the variable tokens of a
// name, and the values the code is asked to build names with.
var placeholders = []struct{ value, doc string }{
	{"RUNID", "<run_id>"}, {"SESSIONID", "<session_id>"}, {"AGENT", "<agent>"},
	{"WORKER", "<id>"}, {"SERVICE", "<service>"}, {"TOOL", "<tool>"},
	{"LOVIA", "<P>"}, {"lovia", "<p>"},
}

// asDoc writes a name the code built the way docs/protocol.md writes it.
func asDoc(name string) string {
	for _, p := range placeholders {
		name = strings.ReplaceAll(name, p.value, p.doc)
	}
	return name
}

// TestProtocolNamesTheCode checks docs/protocol.md against the code: every
// subject, stream, consumer and bucket the code builds, every header, event
// type and error type it sends, and every route the gateway serves is
// named there (as `code`), so the contract cannot drift from the wire
// without this test failing.
func TestProtocolNamesTheCode(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(repoRoot, "docs", "protocol.md"))
	require.NoError(t, err)
	doc := string(data)

	names, err := bus.NewNames(bus.DefaultPrefix)
	require.NoError(t, err)
	must := func(s string, err error) string {
		t.Helper()
		require.NoError(t, err)
		return s
	}
	want := map[string]string{} // the documented form → what it is
	add := func(what string, names ...string) {
		for _, n := range names {
			want[asDoc(n)] = what
		}
	}

	add("subject", must(names.Submit("AGENT")), must(names.Events("RUNID")), names.APISubmit(), names.Agents(),
		names.WorkerPing("WORKER"), names.Control("RUNID"), must(toolsvc.Subject(bus.DefaultPrefix, "SERVICE", "TOOL")))
	for _, op := range bus.RunOps() {
		add("subject", must(names.RunAPI("RUNID", op)))
	}
	for _, op := range bus.SessionOps() {
		add("subject", must(names.SessionAPI("SESSIONID", op)))
	}
	add("stream", names.RunsStream(), names.EventsStream(), names.DeadLetterStream())
	add("consumer", must(names.AgentConsumer("AGENT")), names.DeadLetterConsumer())
	add("bucket", names.FleetBucket(), names.ResultsBucket())
	add("bucket", names.Buckets()...)
	add("header", bus.HeaderMsgID, bus.HeaderEvent, bus.HeaderSeq, bus.HeaderRequest, bus.HeaderSubmission, bus.HeaderRecord,
		bus.HeaderContinues, bus.HeaderHighSeq, bus.HeaderContentType, bus.HeaderServiceError, bus.HeaderServiceErrorCode,
		toolsvc.HeaderRunID, toolsvc.HeaderCallID, toolsvc.HeaderAgent, gateway.HeaderRunID,
		bus.HeaderTraceParent, bus.HeaderTraceState)
	add("content type", bus.ContentTypeJSON, bus.ContentTypeMsgpack)
	for _, typ := range bus.EventTypes() {
		add("event type", string(typ))
	}
	add("error type", bus.TypeInvalidRequest, bus.TypeUnknownAgent, bus.TypeNotFound, bus.TypeInternal,
		gateway.TypeUnauthorized, gateway.TypeForbidden, gateway.TypeMethodNotAllowed, gateway.TypeUnavailable,
		gateway.TypeTimeout, worker.TypeMaxDeliveries, worker.TypeRunLost)
	add("run state", string(bus.StateQueued), string(bus.StateRunning), string(bus.StateCompleted), string(bus.StateFailed))
	for _, r := range gatewayRoutes(t) {
		add("HTTP route", r)
	}

	var missing []string
	for name, what := range want {
		if !strings.Contains(doc, "`"+name+"`") {
			missing = append(missing, what+" `"+name+"`")
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Fatalf("docs/protocol.md does not name %d things the code puts on the wire; document them:\n%s",
			len(missing), strings.Join(missing, "\n"))
	}
}

// gatewayRoutes reads the gateway's route patterns ("POST /v1/runs", …):
// the string constants named route* in pkg/gateway, but routeOther, a
// metrics label.
func gatewayRoutes(t *testing.T) []string {
	t.Helper()
	dir := filepath.Join(repoRoot, "pkg", "gateway")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var routes []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, e.Name()), nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "route") || n.Name == "routeOther" || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					routes = append(routes, v)
				}
			}
		}
	}
	require.NotEmpty(t, routes, "no route constants found in pkg/gateway: the pattern is broken")
	return routes
}
