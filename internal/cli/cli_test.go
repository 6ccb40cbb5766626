package cli

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDevPrintsStreamedRun(t *testing.T) {
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"dev"}, strings.NewReader(""), &out, &errb, os.Getenv)
	require.Equal(t, ExitOK, code, errb.String())
	s := out.String()
	require.Contains(t, s, "→ add(")
	require.Contains(t, s, "← add: 42")
	require.Contains(t, s, "12 + 30 = 42.")
	require.Contains(t, s, "[run_completed]")
}

func TestUnknownCommandIsUsageError(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, ExitUsage, Main(context.Background(), []string{"nope"}, nil, &out, &errb, os.Getenv))
	require.Contains(t, errb.String(), `unknown command "nope"`)
}
