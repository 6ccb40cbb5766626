package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestInjectKey: `lovia inject --key` twice into one run prints one
// token, the first inject's — a retried command injects nothing twice.
func TestInjectKey(t *testing.T) {
	url := startDev(t, "--agents", writeGatedAgents(t))
	env := getenv(map[string]string{"NATS_URL": url})
	ctx := context.Background()
	var out, errb bytes.Buffer
	require.Equal(t, ExitOK, Main(ctx, []string{"submit", "--agent", "gated", "go"}, nil, &out, &errb, env), errb.String())
	runID := strings.TrimSpace(out.String())
	inject := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		code := Main(ctx, append([]string{"inject"}, args...), nil, &out, &errb, env)
		require.Equal(t, ExitOK, code, errb.String())
		return out.String()
	}
	first := inject("--key", "note-1", runID, "one")
	require.Contains(t, first, `"token"`)
	require.Equal(t, first, inject("--key", "note-1", runID, "one again"), "a second inject with the key")
	require.NotEqual(t, first, inject(runID, "no key"), "an inject without a key is a new message")
}
