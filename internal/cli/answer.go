package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// runAnswer is `lovia answer RUN_ID CALL_ID TEXT`: the answer to a run's
// ask_human question (an approve decision whose reason is the answer).
func runAnswer(ctx context.Context, env *Env, args []string) int {
	fs := flagSet(env, "answer", "[--nats URL] RUN_ID CALL_ID TEXT")
	nf := addNATSFlags(fs, env)
	pos, ok := parse(fs, args)
	if !ok {
		return ExitUsage
	}
	if len(pos) < 3 {
		return usageErr(env, fs, "RUN_ID, CALL_ID and the answer TEXT are required (the call id is in the run's approval_required event: lovia tail RUN_ID)")
	}
	text := strings.TrimSpace(strings.Join(pos[2:], " "))
	if text == "" {
		return usageErr(env, fs, "the answer is empty")
	}
	c, nc, err := nf.client("answer")
	if err != nil {
		return fail(env.Stderr, err)
	}
	defer nc.Close()
	rctx, cancel := requestCtx(ctx)
	defer cancel()
	rep, err := c.Approve(rctx, pos[0], pos[1], loop.Approve, text)
	if err != nil {
		return fail(env.Stderr, err)
	}
	printJSON(env, rep)
	return ExitOK
}

// question is the question of an ask_human call ("" for any other call).
func question(call loop.ToolCall) string {
	if call.Name != "ask_human" {
		return ""
	}
	var in struct {
		Question string `json:"question"`
	}
	if json.Unmarshal([]byte(call.Arguments), &in) != nil {
		return ""
	}
	return in.Question
}

// answerOnTerminal asks the person at the terminal a run's ask_human
// question and sends the answer (an empty line declines).
func answerOnTerminal(ctx context.Context, env *Env, c *client.Client, runID string, call loop.ToolCall, q string, stdin *bufio.Reader) {
	fmt.Fprintf(env.Stderr, "\n? %s\n> ", q)
	line, _ := stdin.ReadString('\n')
	answer := strings.TrimSpace(line)
	d, reason := loop.Approve, answer
	if answer == "" {
		d, reason = loop.Reject, "no answer on the terminal"
		fmt.Fprintln(env.Stderr, "(no answer)")
	}
	rctx, cancel := requestCtx(ctx)
	defer cancel()
	if _, err := c.Approve(rctx, runID, call.ID, d, reason); err != nil {
		fmt.Fprintln(env.Stderr, "lovia: sending the answer failed:", err)
	}
}
