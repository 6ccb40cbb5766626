package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

func printJSON(env *Env, v any) {
	b, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintln(env.Stdout, string(b))
}

func usageErr(env *Env, fs *flag.FlagSet, msg string) int {
	fmt.Fprintln(env.Stderr, "lovia:", msg)
	fs.Usage()
	return ExitUsage
}

// subcmd is one subcommand of a command and how many positional
// arguments it takes, itself included.
type subcmd struct {
	name string
	args int
}

// subcommand checks that pos names one of subs with its number of
// arguments; otherwise it reports the usage error (the first line of usage
// says how to call cmd) and returns false with the exit code.
func subcommand(env *Env, fs *flag.FlagSet, cmd, usage string, pos []string, subs ...subcmd) (int, bool) {
	names := make([]string, len(subs))
	for i, s := range subs {
		names[i] = s.name
	}
	list := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	if len(pos) == 0 {
		return usageErr(env, fs, "name a subcommand: "+list), false
	}
	for _, s := range subs {
		if s.name != pos[0] {
			continue
		}
		if len(pos) != s.args {
			return usageErr(env, fs, "use: lovia "+cmd+" "+strings.Split(usage, "\n")[0]), false
		}
		return 0, true
	}
	return usageErr(env, fs, fmt.Sprintf("unknown subcommand %q: use %s", pos[0], list)), false
}

// runRun submits a run and streams it.
func runRun(ctx context.Context, env *Env, args []string) int {
	fs := flagSet(env, "run", "[--nats URL] [--agent NAME] [--session ID] [--json] INPUT")
	nf := addNATSFlags(fs, env)
	agent := fs.String("agent", "demo", "agent to run")
	session := fs.String("session", "", "session id to load and append to")
	asJSON := fs.Bool("json", false, "print one event envelope per line")
	pos, ok := parse(fs, args)
	if !ok {
		return ExitUsage
	}
	if strings.TrimSpace(strings.Join(pos, "")) == "" {
		return usageErr(env, fs, "INPUT is required: give the run's input text")
	}
	c, nc, err := nf.client("run")
	if err != nil {
		return fail(env.Stderr, err)
	}
	defer nc.Close()
	rctx, cancel := requestCtx(ctx)
	rep, err := c.Submit(rctx, &bus.RunRequest{Agent: *agent, SessionID: *session, Input: bus.TextInput(strings.Join(pos, " "))})
	cancel()
	if err != nil {
		return fail(env.Stderr, err)
	}
	if rep.Replayed && rep.Result != nil {
		replayNote(env, rep)
		printJSON(env, rep.Result.Output)
		return ExitOK
	}
	if !*asJSON {
		fmt.Fprintf(env.Stderr, "run %s (agent %s)\n", rep.RunID, rep.Agent)
	}
	return follow(ctx, env, c, rep.RunID, *asJSON, true, bufio.NewReader(env.Stdin))
}

// runSubmit submits a run and prints its id.
func runSubmit(ctx context.Context, env *Env, args []string) int {
	fs := flagSet(env, "submit", "[--nats URL] [--agent NAME] [--session ID] INPUT")
	nf := addNATSFlags(fs, env)
	agent := fs.String("agent", "demo", "agent to run")
	session := fs.String("session", "", "session id to load and append to")
	runID := fs.String("run-id", "", "run id (default: generated)")
	pos, ok := parse(fs, args)
	if !ok {
		return ExitUsage
	}
	if strings.TrimSpace(strings.Join(pos, "")) == "" {
		return usageErr(env, fs, "INPUT is required: give the run's input text")
	}
	c, nc, err := nf.client("submit")
	if err != nil {
		return fail(env.Stderr, err)
	}
	defer nc.Close()
	rctx, cancel := requestCtx(ctx)
	defer cancel()
	rep, err := c.Submit(rctx, &bus.RunRequest{RunID: *runID, Agent: *agent, SessionID: *session, Input: bus.TextInput(strings.Join(pos, " "))})
	if err != nil {
		return fail(env.Stderr, err)
	}
	replayNote(env, rep)
	fmt.Fprintln(env.Stdout, rep.RunID)
	return ExitOK
}

// replayNote tells, on stderr, that a submit replayed a completed run
// instead of running anything (and that another input was not run).
func replayNote(env *Env, rep *bus.SubmitReply) {
	switch {
	case rep.InputDiffers:
		fmt.Fprintf(env.Stderr, "run %s had already completed with another input: that input was NOT run, its stored result is replayed; submit it under a new run id to run it\n", rep.RunID)
	case rep.Replayed:
		fmt.Fprintf(env.Stderr, "run %s had already completed: nothing new runs, its stored result is replayed (lovia status %s)\n", rep.RunID, rep.RunID)
	}
}

// runTail follows a run from its first event to its terminal one.
func runTail(ctx context.Context, env *Env, args []string) int {
	fs := flagSet(env, "tail", "[--nats URL] [--json] RUN_ID")
	nf := addNATSFlags(fs, env)
	asJSON := fs.Bool("json", false, "print one event envelope per line")
	pos, ok := parse(fs, args)
	if !ok {
		return ExitUsage
	}
	if len(pos) != 1 {
		return usageErr(env, fs, "exactly one RUN_ID is required")
	}
	c, nc, err := nf.client("tail")
	if err != nil {
		return fail(env.Stderr, err)
	}
	defer nc.Close()
	// An unknown run id is said at once instead of waiting silently for
	// events that will never come.
	rctx, cancel := requestCtx(ctx)
	_, serr := c.Status(rctx, pos[0])
	cancel()
	var ae *bus.APIError
	if errors.As(serr, &ae) && ae.Type == bus.TypeNotFound {
		return fail(env.Stderr, fmt.Errorf("run %s not found: check the id (lovia submit and lovia run print it)", pos[0]))
	}
	return follow(ctx, env, c, pos[0], *asJSON, false, nil)
}

// runStatus prints a run's status.
func runStatus(ctx context.Context, env *Env, args []string) int {
	fs := flagSet(env, "status", "[--nats URL] RUN_ID")
	nf := addNATSFlags(fs, env)
	pos, ok := parse(fs, args)
	if !ok {
		return ExitUsage
	}
	if len(pos) != 1 {
		return usageErr(env, fs, "exactly one RUN_ID is required")
	}
	c, nc, err := nf.client("status")
	if err != nil {
		return fail(env.Stderr, err)
	}
	defer nc.Close()
	rctx, cancel := requestCtx(ctx)
	defer cancel()
	st, err := c.Status(rctx, pos[0])
	if err != nil {
		return fail(env.Stderr, err)
	}
	printJSON(env, st)
	return ExitOK
}

// runCancel asks a run to stop.
func runCancel(ctx context.Context, env *Env, args []string) int {
	fs := flagSet(env, "cancel", "[--nats URL] [--reason TEXT] RUN_ID")
	nf := addNATSFlags(fs, env)
	reason := fs.String("reason", "cancelled from the command line", "cancel reason")
	pos, ok := parse(fs, args)
	if !ok {
		return ExitUsage
	}
	if len(pos) != 1 {
		return usageErr(env, fs, "exactly one RUN_ID is required")
	}
	c, nc, err := nf.client("cancel")
	if err != nil {
		return fail(env.Stderr, err)
	}
	defer nc.Close()
	rctx, cancel := requestCtx(ctx)
	defer cancel()
	rep, err := c.Cancel(rctx, pos[0], *reason)
	if err != nil {
		return fail(env.Stderr, err)
	}
	if !rep.Cancelled {
		fmt.Fprintf(env.Stderr, "run %s had already ended (%s): nothing to cancel\n", rep.RunID, rep.Status)
	}
	printJSON(env, rep)
	return ExitOK
}

// runApprove decides a gated call.
func runApprove(ctx context.Context, env *Env, args []string) int {
	fs := flagSet(env, "approve", "[--nats URL] [--reject] [--reason TEXT] RUN_ID CALL_ID")
	nf := addNATSFlags(fs, env)
	reject := fs.Bool("reject", false, "reject the call instead of approving it")
	reason := fs.String("reason", "", "reason recorded with the decision")
	pos, ok := parse(fs, args)
	if !ok {
		return ExitUsage
	}
	if len(pos) != 2 {
		return usageErr(env, fs, "RUN_ID and CALL_ID are required")
	}
	c, nc, err := nf.client("approve")
	if err != nil {
		return fail(env.Stderr, err)
	}
	defer nc.Close()
	d := loop.Approve
	if *reject {
		d = loop.Reject
	}
	rctx, cancel := requestCtx(ctx)
	defer cancel()
	rep, err := c.Approve(rctx, pos[0], pos[1], d, *reason)
	if err != nil {
		return fail(env.Stderr, err)
	}
	printJSON(env, rep)
	return ExitOK
}

// runInject queues a steering message.
func runInject(ctx context.Context, env *Env, args []string) int {
	fs := flagSet(env, "inject", "[--nats URL] [--key KEY] RUN_ID TEXT")
	nf := addNATSFlags(fs, env)
	key := fs.String("key", "", "idempotency key: a second inject with the same key into the run is a no-op that prints the first one's token (safe to retry)")
	pos, ok := parse(fs, args)
	if !ok {
		return ExitUsage
	}
	if len(pos) < 2 {
		return usageErr(env, fs, "RUN_ID and TEXT are required")
	}
	c, nc, err := nf.client("inject")
	if err != nil {
		return fail(env.Stderr, err)
	}
	defer nc.Close()
	rctx, cancel := requestCtx(ctx)
	defer cancel()
	var opts []bus.InjectOption
	if *key != "" {
		opts = append(opts, bus.InjectKey(*key))
	}
	tok, err := c.Inject(rctx, pos[0], strings.Join(pos[1:], " "), opts...)
	if err != nil {
		return fail(env.Stderr, err)
	}
	printJSON(env, map[string]string{"token": tok})
	return ExitOK
}

// runSession shows a session.
func runSession(ctx context.Context, env *Env, args []string) int {
	fs := flagSet(env, "session", "show [--nats URL] SESSION_ID")
	nf := addNATSFlags(fs, env)
	pos, ok := parse(fs, args)
	if !ok {
		return ExitUsage
	}
	if len(pos) != 2 || pos[0] != "show" {
		return usageErr(env, fs, "use: lovia session show SESSION_ID")
	}
	c, nc, err := nf.client("session")
	if err != nil {
		return fail(env.Stderr, err)
	}
	defer nc.Close()
	rctx, cancel := requestCtx(ctx)
	defer cancel()
	rep, err := c.Session(rctx, pos[1])
	if err != nil {
		return fail(env.Stderr, err)
	}
	printJSON(env, rep)
	return ExitOK
}
