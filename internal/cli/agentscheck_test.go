package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// lovia agents check validates an agents file with no NATS; lovia worker,
// lovia dev and lovia tools --agents read and refuse a bad file before
// they connect (or start a server), with the same message.
func TestAgentsCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	lovia := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := Main(context.Background(), args, strings.NewReader(""), &out, &errb, getenv(nil))
		return out.String(), errb.String(), code
	}
	good := write("good.yaml", "agents:\n  - name: a\n    model: demo\n    tools: [calculator]\n  - name: b\n    model: scripted\n    script:\n      - text: hi\n")
	out, errs, code := lovia("agents", "check", good)
	require.Equal(t, ExitOK, code, errs)
	require.Equal(t, "agents file "+good+" is valid: 2 agents (a, b)\n", out)

	for _, c := range []struct{ name, body, want string }{
		{"tool.yaml", "agents:\n  - name: a\n    model: demo\n    tools: [calculater]\n", `unknown tool "calculater" (built-in tools: `},
		{"key.yaml", "agents:\n  - name: a\n    modle: demo\n", "unknown keys:\n  line 3: unknown key \"modle\" in an agent"},
		{"indent.yaml", "agents:\n  - name: a\n   model: demo\n    tools: [echo]\n", `line 3: did not find expected '-' indicator, at "model: demo"`},
		{"model.yaml", "agents:\n  - name: a\n    model: \"gemini:flash\"\n", "use demo, scripted (with a script:), or write the model as prefix:model"},
	} {
		bad := write(c.name, c.body)
		_, errs, code := lovia("agents", "check", bad)
		require.Equal(t, ExitFailure, code, c.name)
		require.Contains(t, errs, c.want, c.name)
		require.NotContains(t, errs, "Registry.Register", c.name)
		require.NotContains(t, errs, "line 1:", c.name)
		if c.name != "tool.yaml" {
			continue
		}
		// Before connecting: the unreachable server is not what is said.
		_, errs, code = lovia("worker", "--agents", bad, "--nats", "nats://127.0.0.1:1")
		require.Equal(t, ExitFailure, code)
		require.Contains(t, errs, c.want)
		require.NotContains(t, errs, "cannot connect")
		_, errs, code = lovia("tools", "--agents", bad, "--nats", "nats://127.0.0.1:1")
		require.Equal(t, ExitFailure, code)
		require.Contains(t, errs, c.want)
		_, errs, code = lovia("dev", "--agents", bad, "--nats-port", "0", "--http", "127.0.0.1:0", "--data", t.TempDir())
		require.Equal(t, ExitFailure, code)
		require.Contains(t, errs, c.want)
	}
}
