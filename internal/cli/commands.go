package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

func printJSON(env *Env, v any) {
	b, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintln(env.Stdout, string(b))
}

// usageErr reports a usage error: the message, then how to call the
// command (its flags are one -h away, not a page under the message).
func usageErr(env *Env, fs *flag.FlagSet, msg string) int {
	fmt.Fprintln(env.Stderr, "lovia:", msg)
	var full strings.Builder
	out := fs.Output()
	fs.SetOutput(&full)
	stderr := env.Stderr
	env.Stderr = &full
	fs.Usage()
	env.Stderr = stderr
	fs.SetOutput(out)
	call, _, _ := strings.Cut(full.String(), "\n\nflags:\n")
	fmt.Fprintf(env.Stderr, "%s\n(lovia %s -h lists the flags)\n", call, fs.Name())
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
	fs := flagSet(env, "run", "[--nats URL] [--agent NAME] [--session ID] [--run-id ID] [--if-run-exists P] [--on-busy inject|queue|refuse] [--metadata K=V]... [--json] (INPUT... | - | --input-file FILE)")
	nf := addNATSFlags(fs, env)
	sf := addSubmitFlags(fs)
	asJSON := fs.Bool("json", false, "print one event envelope per line")
	pos, ok := parse(fs, args)
	if !ok {
		return ExitUsage
	}
	req, err := sf.request(pos, env.Stdin)
	if err != nil {
		return usageErr(env, fs, err.Error())
	}
	c, nc, err := nf.client("run")
	if err != nil {
		return fail(env.Stderr, err)
	}
	defer nc.Close()
	rep, err := submit(ctx, c, req)
	if err != nil {
		return fail(env.Stderr, err)
	}
	if rep.Replayed && rep.Result != nil {
		if !*asJSON {
			replayNote(env, rep)
		}
		if text, isText := rep.Result.Output.(string); isText && !*asJSON {
			fmt.Fprintln(env.Stdout, text)
		} else {
			printJSON(env, rep.Result.Output)
		}
		return ExitOK
	}
	if !*asJSON {
		if !sessionNote(env, req, rep) {
			fmt.Fprintf(env.Stderr, "run %s (agent %s)\n", rep.RunID, rep.Agent)
		}
	}
	// The approvals are asked on the terminal; an input read from stdin
	// leaves nothing there to answer them with (they are rejected).
	var answers *bufio.Reader
	if env.Stdin != nil && !sf.fromStdin(pos) {
		answers = bufio.NewReader(env.Stdin)
	}
	return follow(ctx, env, c, rep.RunID, *asJSON, true, answers)
}

// submit sends a run request, saying what to do about one too large for
// the server.
func submit(ctx context.Context, c *client.Client, req *bus.RunRequest) (*bus.SubmitReply, error) {
	rctx, cancel := requestCtx(ctx)
	defer cancel()
	rep, err := c.Submit(rctx, req)
	if errors.Is(err, nats.ErrMaxPayload) {
		return nil, fmt.Errorf("the run request (%d KiB of input) is larger than the NATS server's max_payload: shorten the input, or raise max_payload in the server's configuration", len(req.Input.Text)/1024)
	}
	var ae *bus.APIError
	if errors.As(err, &ae) && ae.Type == bus.TypeInvalidRequest && strings.Contains(ae.Message, "use if_run_exists") {
		// The refusal of --if-run-exists fail, said in the flags' terms.
		msg := strings.TrimPrefix(strings.ReplaceAll(ae.Message, "use if_run_exists ", "give --if-run-exists "), "invalid request: ")
		msg = strings.TrimPrefix(msg, "run_id: ")
		return nil, fmt.Errorf("%s (lovia runs describe %s shows it)", msg, req.RunID)
	}
	return rep, err
}

// runSubmit submits a run and prints its id.
func runSubmit(ctx context.Context, env *Env, args []string) int {
	fs := flagSet(env, "submit", "[--nats URL] [--agent NAME] [--session ID] [--run-id ID] [--if-run-exists P] [--on-busy inject|queue|refuse] [--metadata K=V]... (INPUT... | - | --input-file FILE)")
	nf := addNATSFlags(fs, env)
	sf := addSubmitFlags(fs)
	pos, ok := parse(fs, args)
	if !ok {
		return ExitUsage
	}
	req, err := sf.request(pos, env.Stdin)
	if err != nil {
		return usageErr(env, fs, err.Error())
	}
	c, nc, err := nf.client("submit")
	if err != nil {
		return fail(env.Stderr, err)
	}
	defer nc.Close()
	rep, err := submit(ctx, c, req)
	if err != nil {
		return fail(env.Stderr, err)
	}
	replayNote(env, rep)
	sessionNote(env, req, rep)
	fmt.Fprintln(env.Stdout, rep.RunID)
	return ExitOK
}

// sessionNote tells, on stderr, where a message for a session with a live
// run went (on_busy inject or queue), and reports whether it did.
func sessionNote(env *Env, req *bus.RunRequest, rep *bus.SubmitReply) bool {
	switch {
	case rep.Injected:
		fmt.Fprintf(env.Stderr, "session %s has a live run, %s (agent %s): the input went to its next turn (withdraw it while no turn took it: the inject token is %s)\n",
			req.SessionID, rep.RunID, rep.Agent, rep.InjectToken)
	case rep.QueuedBehind != "":
		fmt.Fprintf(env.Stderr, "session %s has a live run, %s: run %s is queued and starts when it ends\n", req.SessionID, rep.QueuedBehind, rep.RunID)
	default:
		return false
	}
	return true
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
	fs := flagSet(env, "status", "[--nats URL] [--json] RUN_ID")
	nf := addNATSFlags(fs, env)
	asJSON := fs.Bool("json", false, "print the reply as JSON")
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
	if *asJSON {
		printJSON(env, st)
	} else {
		printStatus(env.Stdout, st)
	}
	return ExitOK
}

// runCancel asks a run to stop.
func runCancel(ctx context.Context, env *Env, args []string) int {
	fs := flagSet(env, "cancel", "[--nats URL] [--reason TEXT] [--json] RUN_ID")
	nf := addNATSFlags(fs, env)
	asJSON := fs.Bool("json", false, "print the reply as JSON")
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
	switch {
	case *asJSON:
		printJSON(env, rep)
	case rep.Cancelled && rep.Status == "failed":
		fmt.Fprintf(env.Stdout, "run %s cancelled: no worker held it, so it ended at once with run_failed (RunCancelled)\n", rep.RunID)
	case rep.Cancelled:
		fmt.Fprintf(env.Stdout, "run %s cancelled: it ends with run_failed (RunCancelled) at its next step\n", rep.RunID)
	default:
		fmt.Fprintf(env.Stdout, "run %s had already ended (%s): nothing to cancel\n", rep.RunID, rep.Status)
	}
	return ExitOK
}

// runApprove decides a gated call.
func runApprove(ctx context.Context, env *Env, args []string) int {
	fs := flagSet(env, "approve", "[--nats URL] [--reject] [--reason TEXT] [--json] RUN_ID CALL_ID")
	nf := addNATSFlags(fs, env)
	reject := fs.Bool("reject", false, "reject the call instead of approving it")
	reason := fs.String("reason", "", "reason recorded with the decision")
	asJSON := fs.Bool("json", false, "print the reply as JSON")
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
	if *asJSON {
		printJSON(env, rep)
	}
	if !rep.Accepted {
		// Another decision came first: this one changed nothing.
		return fail(env.Stderr, fmt.Errorf("call %s of run %s was already decided: %s; this decision (%s) was not applied (lovia runs describe %s shows the run)",
			rep.CallID, rep.RunID, decisionText(rep.Decision, rep.Reason), decisionText(d, *reason), rep.RunID))
	}
	if !*asJSON {
		fmt.Fprintf(env.Stdout, "call %s of run %s: %s\n", rep.CallID, rep.RunID, decisionText(rep.Decision, rep.Reason))
	}
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

// decisionText is a decision and its reason, for people: "rejected
// (too risky)", "approved".
func decisionText(d loop.Decision, reason string) string {
	text := string(d) + "d"
	if d == loop.Reject {
		text = "rejected"
	}
	if reason != "" {
		text += " (" + reason + ")"
	}
	return text
}
