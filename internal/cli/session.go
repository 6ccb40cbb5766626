package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

const sessionUsage = `ls [--agent A] [--limit N] [--cursor C] | show ID | export ID | rm ID | rewind ID KEEP_ENTRIES | trim ID --keep-chars N --keep-runs N

Sessions are conversations: a run submitted with --session continues one.
ls lists them (the one with the newest run first), show prints one's
segments with each run's status, turns and tokens and its live run,
export writes its entries as JSON lines, rm deletes it (refused while it
has a live run), rewind keeps its first KEEP_ENTRIES entries, trim cuts
the tool results of all but its last --keep-runs runs to --keep-chars.`

// runSession is `lovia session`: the fleet's sessions.
func runSession(ctx context.Context, env *Env, args []string) int {
	fs := flagSet(env, "session", sessionUsage)
	nf := addNATSFlags(fs, env)
	asJSON := fs.Bool("json", false, "ls, show: print the reply as JSON")
	agent := fs.String("agent", "", "ls: sessions whose newest run is of this agent")
	limit := fs.Int("limit", 0, "ls: page size (default 50)")
	cursor := fs.String("cursor", "", "ls: the page after this next_cursor")
	keepChars := fs.Int("keep-chars", -1, "trim: characters each older tool result keeps")
	keepRuns := fs.Int("keep-runs", -1, "trim: the last runs whose tool results stay whole")
	pos, ok := parse(fs, args)
	if !ok {
		return ExitUsage
	}
	if code, ok := subcommand(env, fs, "session", sessionUsage, pos,
		subcmd{"ls", 1}, subcmd{"show", 2}, subcmd{"export", 2}, subcmd{"rm", 2}, subcmd{"rewind", 3}, subcmd{"trim", 2}); !ok {
		return code
	}
	var keep int
	switch pos[0] {
	case "rewind":
		n, err := strconv.Atoi(pos[2])
		if err != nil || n < 0 {
			return usageErr(env, fs, fmt.Sprintf("KEEP_ENTRIES %q is not a count: give the number of entries to keep (0 empties the session)", pos[2]))
		}
		keep = n
	case "trim":
		if *keepChars < 0 || *keepRuns < 0 {
			return usageErr(env, fs, "trim needs --keep-chars N and --keep-runs N (e.g. --keep-chars 200 --keep-runs 2)")
		}
	}
	c, nc, err := nf.client("session")
	if err != nil {
		return fail(env.Stderr, err)
	}
	defer nc.Close()
	rctx, cancel := requestCtx(ctx)
	defer cancel()
	switch pos[0] {
	case "ls":
		rep, err := c.ListSessions(rctx, &bus.SessionsListRequest{Agent: *agent, Limit: *limit, Cursor: *cursor})
		if err != nil {
			return fail(env.Stderr, err)
		}
		if *asJSON {
			printJSON(env, rep)
			return ExitOK
		}
		if len(rep.Sessions) == 0 {
			fmt.Fprintln(env.Stdout, "no sessions: submit a run with --session ID to start one")
			return ExitOK
		}
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SESSION\tRUNS\tLAST RUN\tAGENT\tSTATUS\tCREATED")
		for _, s := range rep.Sessions {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", s.SessionID, s.Runs, s.LastRun.RunID, s.LastRun.Agent, s.LastRun.Status,
				s.LastRun.CreatedAt.Local().Format(time.DateTime))
		}
		_ = tw.Flush()
		if rep.NextCursor != "" {
			fmt.Fprintf(env.Stderr, "more: lovia session ls --cursor %s\n", rep.NextCursor)
		}
	case "show":
		rep, err := c.Session(rctx, pos[1])
		if err != nil {
			return fail(env.Stderr, err)
		}
		if *asJSON {
			printJSON(env, rep)
		} else {
			printSession(env.Stdout, rep)
		}
	case "export":
		rep, err := c.ExportSession(rctx, pos[1])
		if err != nil {
			return fail(env.Stderr, err)
		}
		enc := json.NewEncoder(env.Stdout)
		for i := range rep.Lines {
			if err := enc.Encode(&rep.Lines[i]); err != nil {
				return fail(env.Stderr, err)
			}
		}
	case "rm":
		if err := c.DeleteSession(rctx, pos[1]); err != nil {
			return fail(env.Stderr, err)
		}
		fmt.Fprintf(env.Stdout, "session %s deleted\n", pos[1])
	case "rewind":
		n, err := c.Rewind(rctx, pos[1], keep)
		if err != nil {
			return fail(env.Stderr, err)
		}
		fmt.Fprintf(env.Stdout, "session %s: %d entr%s removed\n", pos[1], n, map[bool]string{true: "y", false: "ies"}[n == 1])
	case "trim":
		n, err := c.TrimSession(rctx, pos[1], *keepChars, *keepRuns)
		if err != nil {
			return fail(env.Stderr, err)
		}
		fmt.Fprintf(env.Stdout, "session %s: %d tool result%s trimmed\n", pos[1], n, plural(n))
	}
	return ExitOK
}
