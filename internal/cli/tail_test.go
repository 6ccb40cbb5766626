package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// lovia tail of a run id the fleet does not know says so at once, instead
// of waiting silently for events that never come.
func TestTailUnknownRun(t *testing.T) {
	url := startDev(t)
	env := getenv(map[string]string{"NATS_URL": url})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := Main(ctx, []string{"tail", "no-such-run"}, strings.NewReader(""), &out, &errb, env)
	require.NoError(t, ctx.Err(), "lovia tail waited for a run that does not exist")
	require.Equal(t, ExitFailure, code, errb.String())
	require.Contains(t, errb.String(), "run no-such-run not found")
}

// lovia workers lists the live workers with the agents they serve.
func TestWorkersCommand(t *testing.T) {
	url := startDev(t, "--workers", "2")
	env := getenv(map[string]string{"NATS_URL": url})
	var out, errb bytes.Buffer
	require.Eventually(t, func() bool {
		out.Reset()
		errb.Reset()
		code := Main(context.Background(), []string{"workers"}, strings.NewReader(""), &out, &errb, env)
		return code == ExitOK && strings.Contains(out.String(), "dev-1") && strings.Contains(out.String(), "dev-2")
	}, 20*time.Second, 50*time.Millisecond, "lovia workers: %s %s", out.String(), errb.String())
	require.Contains(t, out.String(), "demo", "the agents each worker serves")
	require.Contains(t, out.String(), "IN FLIGHT")
}
