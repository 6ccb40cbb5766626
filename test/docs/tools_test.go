package docs_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/tools"
)

var (
	codeSpanRE = regexp.MustCompile("`([a-z_]+)`")
	parenRE    = regexp.MustCompile(`\([^)]*\)`)
)

// TestBuiltinToolsTable checks the README's table of built-in tools
// against the tools a worker has: the same tools, and for each the
// arguments its JSON Schema takes.
func TestBuiltinToolsTable(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	require.NoError(t, err)
	doc := string(data)
	start := strings.Index(doc, "### Built-in tools and their arguments")
	require.NotEqual(t, -1, start, "README.md has no Built-in tools section")
	documented := map[string][]string{}
	for _, line := range strings.Split(doc[start:], "\n")[1:] {
		if strings.HasPrefix(line, "#") {
			break
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		// The arguments are the code spans outside parentheses:
		// "`method` (GET, HEAD, …; default GET)".
		args := []string{}
		for _, m := range codeSpanRE.FindAllStringSubmatch(parenRE.ReplaceAllString(cells[2], ""), -1) {
			args = append(args, m[1])
		}
		slices.Sort(args)
		documented[name] = args
	}
	require.NotEmpty(t, documented, "the table's pattern found no tool")

	set, err := tools.Builtin(tools.Config{Workspace: t.TempDir()})
	require.NoError(t, err)
	// Built for each agent from its http: settings (pkg/catalog).
	set[tools.HTTPRequestName] = tools.HTTPRequest(tools.HTTPPolicy{})
	set[tools.ReadPageName] = tools.ReadPage(tools.HTTPPolicy{})
	have := map[string][]string{}
	for _, name := range set.Names() {
		var schema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		require.NoError(t, json.Unmarshal(set[name].Schema().Parameters, &schema), name)
		args := []string{}
		for p := range schema.Properties {
			args = append(args, p)
		}
		slices.Sort(args)
		have[name] = args
	}
	for name, args := range have {
		got, ok := documented[name]
		require.True(t, ok, "the README's Built-in tools table has no row for %s (arguments %v)", name, args)
		require.Equal(t, args, got, "the README's Built-in tools table gives %s other arguments than its schema", name)
	}
	for name := range documented {
		require.Contains(t, have, name, "the README's Built-in tools table has a row for %s, which is not a built-in tool", name)
	}
}
