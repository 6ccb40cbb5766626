package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// follow tails a run to its terminal event, rendering it as text (or JSON
// lines), and returns the exit status. With ask, approval requests are
// answered on the terminal.
func follow(ctx context.Context, env *Env, c *client.Client, runID string, asJSON, ask bool, stdin *bufio.Reader) int {
	tail, err := c.Tail(ctx, runID, bus.FromStart())
	if err != nil {
		return fail(env.Stderr, err)
	}
	defer tail.Close(context.Background())
	r := newRenderer(env)
	defer r.spin.stop()
	decided := map[string]bool{}
	for envl, err := range tail.All(ctx) {
		if err != nil {
			if ctx.Err() != nil {
				fmt.Fprintln(env.Stderr, "\nlovia: interrupted; the run goes on (follow it with `lovia tail "+runID+"`)")
				return ExitFailure
			}
			return fail(env.Stderr, err)
		}
		if asJSON {
			b, err := envl.MarshalAs(bus.JSON)
			if err != nil {
				return fail(env.Stderr, err)
			}
			fmt.Fprintln(env.Stdout, string(b))
		}
		r.spin.stop() // before anything is written: the prompt, the JSON line
		ev, err := envl.Event()
		if err != nil {
			fmt.Fprintf(env.Stderr, "lovia: event %d (%s) could not be decoded: %v\n", envl.Seq, envl.Type, err)
			continue
		}
		// A resumed run (after a park or a crash) asks again about a call
		// already shown and answered here; the stored decision applies.
		ar, gated := ev.(*loop.ApprovalRequired)
		again := gated && decided[ar.Call.ID]
		if !asJSON && !again {
			r.render(ev)
		}
		if gated && !again && ask && stdin != nil {
			decided[ar.Call.ID] = true
			decide(ctx, env, c, runID, ar.Call, stdin)
		} else if gated && !again && ask && !asJSON {
			// The input came from stdin: nothing is left there to answer.
			decided[ar.Call.ID] = true
			if question(ar.Call) != "" {
				fmt.Fprintf(env.Stderr, "answer it: lovia answer %s %s TEXT\n", runID, ar.Call.ID)
			} else {
				fmt.Fprintf(env.Stderr, "decide it: lovia approve %s %s (or --reject)\n", runID, ar.Call.ID)
			}
		}
		switch e := ev.(type) {
		case *loop.RunCompleted:
			return ExitOK
		case *loop.RunFailed:
			_ = e
			return ExitFailure
		}
	}
	return ExitFailure
}

func decide(ctx context.Context, env *Env, c *client.Client, runID string, call loop.ToolCall, stdin *bufio.Reader) {
	if q := question(call); q != "" {
		answerOnTerminal(ctx, env, c, runID, call, q, stdin)
		return
	}
	fmt.Fprintf(env.Stderr, "\n? approve %s(%s) [y/N] ", call.Name, call.Arguments)
	line, err := stdin.ReadString('\n')
	d := loop.Reject
	if strings.EqualFold(strings.TrimSpace(line), "y") || strings.EqualFold(strings.TrimSpace(line), "yes") {
		d = loop.Approve
	}
	if err != nil && line == "" {
		fmt.Fprintln(env.Stderr, "(no answer: rejecting)")
	}
	rctx, cancel := requestCtx(ctx)
	defer cancel()
	if _, err := c.Approve(rctx, runID, call.ID, d, "answered on the terminal"); err != nil {
		fmt.Fprintln(env.Stderr, "lovia: sending the decision failed:", err)
	}
}

// renderer prints events for people: in colour on a terminal (plain when
// piped or with NO_COLOR), with a spinner on stderr while a tool runs.
type renderer struct {
	w, errw   io.Writer
	midLine   bool
	reasoning bool
	pal       palette
	spin      *spinner // nil: no spinner
}

func newRenderer(env *Env) *renderer {
	r := &renderer{w: env.Stdout, errw: env.Stderr, pal: palette{on: useColor(env, env.Stdout)}}
	if useSpinner(env, env.Stderr) {
		r.spin = &spinner{w: env.Stderr, interval: 100 * time.Millisecond}
	}
	return r
}

func (r *renderer) newline() {
	if r.midLine {
		fmt.Fprintln(r.w)
		r.midLine = false
	}
}

func (r *renderer) render(ev loop.Event) {
	r.spin.stop()
	p := r.pal
	switch e := ev.(type) {
	case *loop.TextDelta:
		if r.reasoning {
			fmt.Fprintln(r.errw)
			r.reasoning = false
		}
		fmt.Fprint(r.w, e.Delta)
		r.midLine = !strings.HasSuffix(e.Delta, "\n")
	case *loop.ReasoningDelta:
		if !r.reasoning {
			fmt.Fprint(r.errw, "(thinking) ")
			r.reasoning = true
		}
		fmt.Fprint(r.errw, e.Delta)
	case *loop.OutputDiscarded:
		r.newline()
		fmt.Fprintln(r.errw, "[output discarded; the turn restarts]")
	case *loop.MessageCompleted:
		r.newline()
	case *loop.ToolCallStarted:
		r.newline()
		fmt.Fprintf(r.w, "%s %s(%s)\n", p.paint(styleCyan, "→"), p.paint(styleBold, e.Call.Name), short(e.Call.Arguments, 200))
		r.spin.start(e.Call.Name+" running", p)
	case *loop.ToolCallCompleted:
		r.newline()
		mark := p.paint(styleGreen, "←")
		if e.IsError {
			mark = p.paint(styleRed, "✗")
		}
		fmt.Fprintf(r.w, "%s %s: %s\n", mark, e.Call.Name, short(e.Output, 300))
	case *loop.ApprovalRequired:
		r.newline()
		fmt.Fprintf(r.w, "%s %s(%s) needs approval (call %s)\n", p.paint(styleYellow, "⏸"), e.Call.Name, short(e.Call.Arguments, 200), e.Call.ID)
	case *loop.ApprovalResolved:
		fmt.Fprintf(r.w, "  %s\n", decisionText(e.Decision, e.Reason))
	case *loop.UserMessageInjected:
		r.newline()
		fmt.Fprintf(r.w, "» %s\n", e.Content)
	case *loop.HandoffOccurred:
		r.newline()
		fmt.Fprintf(r.w, "%s handed off from %s to %s\n", p.paint(styleMagenta, "⇢"), e.FromAgent, e.ToAgent)
	case *bus.RunResumed:
		r.newline()
		fmt.Fprintln(r.errw, p.paint(styleDim, fmt.Sprintf("[resumed on worker %s, attempt %d]", e.Worker, e.Attempt)))
	case *loop.ContextCompacted:
		fmt.Fprintf(r.errw, "[context compacted: %s, %d → %d tokens]\n", e.Notice.Reason, e.Notice.TokensBefore, e.Notice.TokensAfter)
	case *loop.RunCompleted:
		r.newline()
		if _, isText := e.Output.(string); !isText && e.Output != nil {
			b, _ := json.MarshalIndent(e.Output, "", "  ")
			fmt.Fprintln(r.w, string(b))
		}
	case *loop.RunFailed:
		r.newline()
		fmt.Fprintf(r.errw, "%s: %s: %s\n", p.paint(styleRed, "run failed"), e.Error.Type, e.Error.Message)
		if e.Error.Hint != "" {
			fmt.Fprintf(r.errw, "  hint: %s\n", e.Error.Hint)
		}
	}
}

func short(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
