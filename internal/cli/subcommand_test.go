package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSubcommandUsage: agents and schedule name their subcommands when
// none or an unknown one is given, and show the call when the arguments do
// not fit — before they connect to anything.
func TestSubcommandUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"agents"}, "name a subcommand: apply, check, ls, get, history or rm"},
		{[]string{"agents", "push"}, `unknown subcommand "push": use apply, check, ls, get, history or rm`},
		{[]string{"agents", "get"}, "use: lovia agents apply FILE [--prune] | check FILE | ls [--json] | get NAME"},
		{[]string{"schedule"}, "name a subcommand: add, ls, get, rm, pause or resume"},
		{[]string{"schedule", "stop", "x"}, `unknown subcommand "stop": use add, ls, get, rm, pause or resume`},
		{[]string{"schedule", "ls", "extra"}, "use: lovia schedule add NAME --agent A"},
	} {
		var out, errb bytes.Buffer
		code := Main(context.Background(), c.args, strings.NewReader(""), &out, &errb, getenv(nil))
		require.Equal(t, ExitUsage, code, strings.Join(c.args, " "))
		require.Contains(t, errb.String(), c.want, strings.Join(c.args, " "))
	}
}
