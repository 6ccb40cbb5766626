package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// runBounded runs `lovia ARGS` for at most 20s (a gateway that starts is
// stopped then) and returns its exit status and stderr.
func runBounded(t *testing.T, env func(string) string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := Main(ctx, args, strings.NewReader(""), &out, &errb, env)
	return code, errb.String()
}

// A gateway told to take tokens but given none fails closed: an empty
// --token, or $LOVIA_TOKENS set without a token in it, is refused before
// it serves anyone without authentication.
func TestGatewayRefusesEmptyTokens(t *testing.T) {
	t.Parallel()
	srv := startJetStream(t)
	code, errs := runBounded(t, getenv(nil), "gateway", "--nats", srv.ClientURL(), "--http", "127.0.0.1:0", "--token", " ")
	require.Equal(t, ExitUsage, code, errs)
	require.Contains(t, errs, "--token is empty: give the token clients must present")

	code, errs = runBounded(t, getenv(map[string]string{"LOVIA_TOKENS": " , "}), "gateway", "--nats", srv.ClientURL(), "--http", "127.0.0.1:0")
	require.Equal(t, ExitFailure, code, errs)
	require.Contains(t, errs, "$LOVIA_TOKENS is set but holds no token: set it to comma-separated tokens, or unset it")
	require.NotContains(t, errs, "lovia gateway on", "the gateway served")
}
