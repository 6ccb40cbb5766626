package cli

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOutageBudgetFlag: lovia worker and lovia dev take --outage-budget
// (default 2m, shown in their help), and a value that is not a duration
// is a usage error that names the flag.
func TestOutageBudgetFlag(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"worker", "dev"} {
		var out, errb bytes.Buffer
		Main(context.Background(), []string{cmd, "--help"}, nil, &out, &errb, os.Getenv)
		help := out.String() + errb.String()
		require.Contains(t, help, "-outage-budget", "%s --help", cmd)
		require.Contains(t, help, "2m0s", "%s --help shows the default", cmd)

		out.Reset()
		errb.Reset()
		code := Main(context.Background(), []string{cmd, "--outage-budget", "soon"}, nil, &out, &errb, os.Getenv)
		require.Equal(t, ExitUsage, code, "%s --outage-budget soon", cmd)
		require.Contains(t, errb.String(), "outage-budget")
	}
}
