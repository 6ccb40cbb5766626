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
