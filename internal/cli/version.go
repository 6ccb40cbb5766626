package cli

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// runVersion is `lovia version` (and `lovia --version`): the build's
// version and commit, and the Go and nats-server versions it was built
// with.
func runVersion(_ context.Context, env *Env, _ []string) int {
	version, commit, server := "(devel)", "", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				commit = s.Value
			}
		}
		for _, d := range bi.Deps {
			if d.Path == "github.com/nats-io/nats-server/v2" {
				server = d.Version
			}
		}
	}
	fmt.Fprintf(env.Stdout, "lovia %s\n", version)
	if commit != "" {
		fmt.Fprintf(env.Stdout, "commit      %s\n", commit)
	}
	fmt.Fprintf(env.Stdout, "go          %s\n", runtime.Version())
	if server != "" {
		fmt.Fprintf(env.Stdout, "nats-server %s (embedded by lovia dev)\n", server)
	}
	return ExitOK
}
