package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
)

// runWorkers is `lovia workers`: the live workers of the fleet.
func runWorkers(ctx context.Context, env *Env, args []string) int {
	fs := flagSet(env, "workers", "[--nats URL] [--json]")
	nf := addNATSFlags(fs, env)
	asJSON := fs.Bool("json", false, "print the reply as JSON")
	pos, ok := parse(fs, args)
	if !ok {
		return ExitUsage
	}
	if len(pos) != 0 {
		return usageErr(env, fs, "lovia workers takes no arguments")
	}
	c, nc, err := nf.client("workers")
	if err != nil {
		return fail(env.Stderr, err)
	}
	defer nc.Close()
	rctx, cancel := requestCtx(ctx)
	defer cancel()
	rep, err := c.Workers(rctx)
	if err != nil {
		return fail(env.Stderr, err)
	}
	if *asJSON {
		printJSON(env, rep)
		return ExitOK
	}
	if len(rep.Workers) == 0 {
		fmt.Fprintln(env.Stdout, "no live worker: start one with lovia worker (or lovia dev)")
		return ExitOK
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tAGENTS\tIN FLIGHT\tSLOTS\tUP\tVERSION\tAGENT VERSIONS")
	for _, w := range rep.Workers {
		up := time.Since(w.StartedAt).Round(time.Second)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", w.ID, strings.Join(w.Agents, ","), w.InFlight, w.Concurrency, up, w.Version, agentVersionsText(w.Agents, w.AgentVersions))
	}
	_ = tw.Flush()
	return ExitOK
}

// agentVersionsText lists each agent's version, "name=version", in the
// order of agents ("-" when the worker announced none).
func agentVersionsText(agents []string, versions map[string]string) string {
	var parts []string
	for _, a := range agents {
		if v := versions[a]; v != "" {
			parts = append(parts, a+"="+v)
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}
