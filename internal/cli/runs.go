package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

const runsUsage = `list [--agent A] [--status S[,S]] [--session ID] [--worker ID] [--parent RUN_ID] [--schedule NAME]
                [--since T] [--until T] [--awaiting] [--limit N] [--cursor C] [--json]
   or: lovia runs describe RUN_ID [--json]
(T is an RFC 3339 time, 2026-12-01T09:00:00Z, or a duration ago: 90m, 24h)`

// runRuns is `lovia runs list` and `lovia runs describe`.
func runRuns(ctx context.Context, env *Env, args []string) int {
	fs := flagSet(env, "runs", runsUsage)
	nf := addNATSFlags(fs, env)
	agent := fs.String("agent", "", "list: runs of this agent")
	var status multiFlag
	fs.Var(&status, "status", "list: runs in these statuses: queued, running, parked, completed, failed (repeatable, or comma-separated)")
	session := fs.String("session", "", "list: runs of this session")
	workerID := fs.String("worker", "", "list: runs this worker holds or last held")
	parent := fs.String("parent", "", "list: the children of this run")
	sched := fs.String("schedule", "", "list: the runs this schedule fired")
	since := fs.String("since", "", "list: runs created at or after T")
	until := fs.String("until", "", "list: runs created before T")
	awaiting := fs.Bool("awaiting", false, "list: runs waiting for an approval or an answer")
	limit := fs.Int("limit", 0, fmt.Sprintf("list: runs per page, 1-%d (default %d)", bus.MaxListLimit, bus.DefaultListLimit))
	cursor := fs.String("cursor", "", "list: the page after this cursor (the last page's hint prints it)")
	asJSON := fs.Bool("json", false, "print the reply as JSON")
	pos, ok := parse(fs, args)
	if !ok {
		return ExitUsage
	}
	if len(pos) == 0 {
		return usageErr(env, fs, "name a subcommand: list or describe")
	}
	switch {
	case pos[0] == "list" && len(pos) != 1:
		return usageErr(env, fs, "lovia runs list takes flags, not arguments")
	case pos[0] == "describe" && len(pos) != 2:
		// Its own usage, not the listing's flags.
		fmt.Fprintln(env.Stderr, "lovia: name the run: lovia runs describe RUN_ID [--json] (lovia runs list lists the ids)")
		return ExitUsage
	case pos[0] != "list" && pos[0] != "describe":
		return usageErr(env, fs, fmt.Sprintf("unknown subcommand %q: use list or describe", pos[0]))
	}
	now := time.Now()
	req := &bus.RunsListRequest{Agent: *agent, Status: bus.StatusFilter(status), Session: *session, Worker: *workerID, Parent: *parent, Schedule: *sched,
		Awaiting: *awaiting, Limit: *limit, Cursor: *cursor}
	if pos[0] == "list" {
		var err error
		if req.Since, err = timeFlag("since", *since, now); err != nil {
			return usageErr(env, fs, err.Error())
		}
		if req.Until, err = timeFlag("until", *until, now); err != nil {
			return usageErr(env, fs, err.Error())
		}
		if err := req.Validate(); err != nil {
			return usageErr(env, fs, strings.TrimPrefix(err.Error(), "invalid request: "))
		}
	}
	c, nc, err := nf.client("runs")
	if err != nil {
		return fail(env.Stderr, err)
	}
	defer nc.Close()
	rctx, cancel := requestCtx(ctx)
	defer cancel()
	if pos[0] == "describe" {
		d, err := c.DescribeRun(rctx, pos[1])
		if err != nil {
			return fail(env.Stderr, err)
		}
		if *asJSON {
			printJSON(env, d)
		} else {
			printDescription(env.Stdout, d, now)
		}
		return ExitOK
	}
	rep, err := c.ListRuns(rctx, req)
	if err != nil {
		return fail(env.Stderr, err)
	}
	if *asJSON {
		printJSON(env, rep)
		return ExitOK
	}
	printRuns(env.Stdout, rep.Runs, now)
	k := rep.Counts
	fmt.Fprintf(env.Stdout, "queued %d · running %d · parked %d · completed %d · failed %d\n", k.Queued, k.Running, k.Parked, k.Completed, k.Failed)
	if rep.NextCursor != "" {
		fmt.Fprintf(env.Stderr, "more runs: add --cursor %s\n", rep.NextCursor)
	}
	return ExitOK
}

// timeFlag reads an RFC 3339 time or a duration before now.
func timeFlag(name, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("--%s %q is neither an RFC 3339 time (2026-12-01T09:00:00Z) nor a duration ago (90m, 24h)", name, v)
}

// printRuns writes runs as a table.
func printRuns(w io.Writer, runs []bus.RunSummary, now time.Time) {
	if len(runs) == 0 {
		fmt.Fprintln(w, "no runs match")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tAGENT\tSTATUS\tWORKER\tTURNS\tCREATED\tAWAITING")
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.RunID, r.Agent, r.Status, dash(r.Worker), r.Turns, ago(r.CreatedAt, now), awaitingText(r.Awaiting))
	}
	_ = tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ago is how long before now t was, to the second ("3m20s ago").
func ago(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t).Round(time.Second)
	if d < time.Second {
		return "just now"
	}
	return d.String() + " ago"
}

func awaitingText(a *bus.RunAwaiting) string {
	if a == nil {
		return ""
	}
	what := "approval of " + dash(a.Tool)
	if a.Kind == bus.AwaitQuestion {
		what = fmt.Sprintf("answer to %q", a.Question)
	}
	return what + " (call " + a.CallID + ")"
}

// printDescription writes a run's description as text.
func printDescription(w io.Writer, d *bus.RunDescription, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	line := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, args...)...) }
	line("run", "%s", d.RunID)
	agent := d.Agent
	if d.FinalAgent != "" && d.FinalAgent != d.Agent {
		agent += " (ended with " + d.FinalAgent + ")"
	}
	line("agent", "%s", agent)
	st := string(d.Status) + heldBy(d.Status, d.Worker)
	line("status", "%s, attempt %d, submission %d", st, d.Attempt, d.Submissions)
	if d.Waiting != "" {
		line("waiting", "%s", d.Waiting)
	}
	if d.SessionID != "" {
		line("session", "%s", d.SessionID)
	}
	if d.ParentRunID != "" {
		line("parent", "%s", d.ParentRunID)
	}
	line("created", "%s (%s)", d.CreatedAt.Format(time.RFC3339), ago(d.CreatedAt, now))
	if !d.StartedAt.IsZero() {
		line("started", "%s", d.StartedAt.Format(time.RFC3339))
	}
	if !d.FinishedAt.IsZero() {
		line("finished", "%s", d.FinishedAt.Format(time.RFC3339))
	}
	if d.StartedAt.IsZero() {
		line("duration", "- (no worker started it)")
	} else {
		line("duration", "%s", (time.Duration(d.DurationMS) * time.Millisecond).String())
	}
	line("turns", "%d", d.Turns)
	if d.Usage != nil {
		line("usage", "%d input + %d output = %d tokens", d.Usage.InputTokens, d.Usage.OutputTokens, d.Usage.TotalTokens)
	}
	if a := d.Awaiting; a != nil {
		line("awaiting", "%s, until %s", awaitingText(a), a.Deadline.Format(time.RFC3339))
		if a.Kind == bus.AwaitQuestion {
			line("", "answer: lovia answer %s %s TEXT", d.RunID, a.CallID)
		} else {
			line("", "decide: lovia approve %s %s (or --reject)", d.RunID, a.CallID)
		}
	}
	if len(d.Metadata) > 0 {
		line("metadata", "%s", metadataText(d.Metadata))
	}
	if d.Error != nil {
		line("error", "%s: %s", d.Error.Type, d.Error.Message)
		if d.Error.Hint != "" {
			line("hint", "%s", d.Error.Hint)
		}
	}
	_ = tw.Flush()
	if d.Result != nil {
		printOutput(w, d.Result.Output)
	}
	fmt.Fprintln(w, "\nhistory:")
	if d.AttemptsDropped > 0 {
		fmt.Fprintf(w, "  (%d earlier steps not kept)\n", d.AttemptsDropped)
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, s := range d.Attempts {
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\n", s.N, s.Kind, dash(s.Worker), s.At.Format(time.RFC3339Nano))
	}
	_ = tw.Flush()
	if len(d.Children) > 0 {
		fmt.Fprintln(w, "\nchildren:")
		printRuns(w, d.Children, now)
	}
}
