package loop_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

// textStep is a custom scripted step that runs before(ctx) and then answers
// s like scripted.Text (one delta, usage in 1/out 1).
func textStep(s string, before func(ctx context.Context)) scripted.Step {
	return scripted.Step{Func: func(ctx context.Context, _ *loop.ModelRequest, emit func(loop.Delta) error) error {
		if before != nil {
			before(ctx)
		}
		if err := emit(loop.Delta{Kind: loop.DeltaText, Text: s}); err != nil {
			return err
		}
		return emit(loop.Delta{Kind: loop.DeltaUsage, Usage: loop.Usage{InputTokens: 1, OutputTokens: 1, TotalTokens: 2}})
	}}
}

// deltaTexts returns the text of every TextDelta, with "<OD>" for each
// OutputDiscarded, in stream order.
func deltaTexts(evs []loop.Event) []string {
	var out []string
	for _, ev := range evs {
		switch e := ev.(type) {
		case *loop.TextDelta:
			out = append(out, e.Delta)
		case *loop.OutputDiscarded:
			out = append(out, "<OD>")
		}
	}
	return out
}

// §8.9 Mailbox steering, §8.10 Provider retries.
var steerScenarios = []scenario{
	{"S55_same_turn_push_and_withdrawal", func(t *testing.T) {
		t.Run("push", func(t *testing.T) {
			cp := loop.NewMemoryCheckpointer()
			var stored []string // the checkpoint as the model call begins
			p := scripted.New([]scripted.Step{textStep("ok", func(ctx context.Context) {
				s, err := cp.Load(ctx, "r1")
				if err == nil {
					stored = entrySigs(s.Entries)
				}
			})})
			a := agentWith(p)
			a.Hooks = loop.NewHooks().On(func(ctx context.Context, rc *loop.RunContext, ev loop.Event) {
				if ev.(*loop.TurnStarted).TurnNo == 1 {
					_, err := rc.Mailbox.Push(ctx, loop.MailMessage{Content: "X"})
					assert.NoError(t, err)
				}
			}, loop.EventTurnStarted)
			evs, res, err := stream(t, a, "hi", loop.WithCheckpoint(cp, "r1"))
			require.NoError(t, err)
			require.Equal(t, []string{"RS(a)", "TS(1)", "UMI(X,1)", "TD+", "MC[Txt(ok)]", "TE(1)", "RC"}, sig(evs))
			require.Equal(t, []string{"In(user,hi)", "In(user,X)", "Txt(ok)"}, entrySigs(res.Entries))
			req := p.Requests()[0].Entries
			require.Equal(t, "In(user,X)", entrySig(req[len(req)-1]), "request 1 ends with user X")
			// Injected messages are saved before the model call consumes them.
			require.Equal(t, []string{"In(user,hi)", "In(user,X)"}, stored)
		})
		t.Run("withdrawal", func(t *testing.T) {
			p := scripted.New([]scripted.Step{scripted.Text("ok")})
			a := agentWith(p)
			a.Hooks = loop.NewHooks().On(func(ctx context.Context, rc *loop.RunContext, ev loop.Event) {
				if ev.(*loop.TurnStarted).TurnNo != 1 {
					return
				}
				draft, err := rc.Mailbox.Push(ctx, loop.MailMessage{Content: "draft"})
				assert.NoError(t, err)
				_, err = rc.Mailbox.Push(ctx, loop.MailMessage{Content: "keep"})
				assert.NoError(t, err)
				removed, err := rc.Mailbox.Remove(ctx, draft)
				assert.NoError(t, err)
				assert.True(t, removed)
			}, loop.EventTurnStarted)
			evs, res, err := stream(t, a, "hi")
			require.NoError(t, err)
			require.Equal(t, []string{"RS(a)", "TS(1)", "UMI(keep,1)", "TD+", "MC[Txt(ok)]", "TE(1)", "RC"}, sig(evs))
			require.Equal(t, []string{"In(user,hi)", "In(user,keep)", "Txt(ok)"}, entrySigs(res.Entries))
		})
	}},
	{"S56_late_push", func(t *testing.T) {
		check := func(t *testing.T, mb loop.Mailbox, evs []loop.Event, res *loop.RunResult, err error) {
			t.Helper()
			require.NoError(t, err)
			require.Equal(t, []string{"RS(a)", "TS(1)", "TD+", "MC[Txt(final)]", "TE(1)", "RC"}, sig(evs), "no UMI")
			require.Equal(t, 1, res.Turns)
			require.Equal(t, []string{"In(user,hi)", "Txt(final)"}, entrySigs(res.Entries))
			left, derr := mb.Drain(context.Background())
			require.NoError(t, derr)
			require.Len(t, left, 1, "the caller's mailbox still holds the late item")
			require.Equal(t, "late", left[0].Content)
		}
		t.Run("during_final_model_call", func(t *testing.T) {
			mb := loop.NewMemoryMailbox()
			p := scripted.New([]scripted.Step{textStep("final", func(ctx context.Context) {
				_, err := mb.Push(ctx, loop.MailMessage{Content: "late"})
				assert.NoError(t, err)
			})})
			evs, res, err := stream(t, agentWith(p), "hi", loop.WithMailbox(mb))
			check(t, mb, evs, res, err)
		})
		t.Run("message_completed_hook", func(t *testing.T) {
			mb := loop.NewMemoryMailbox()
			a := agentWith(scripted.New([]scripted.Step{scripted.Text("final")}))
			a.Hooks = loop.NewHooks().On(func(ctx context.Context, rc *loop.RunContext, _ loop.Event) {
				_, err := rc.Mailbox.Push(ctx, loop.MailMessage{Content: "late"})
				assert.NoError(t, err)
			}, loop.EventMessageCompleted)
			evs, res, err := stream(t, a, "hi", loop.WithMailbox(mb))
			check(t, mb, evs, res, err)
		})
	}},
	{"S58_transient_then_success", func(t *testing.T) {
		p := scripted.New([]scripted.Step{{Text: "ok", FailTimes: 2}})
		evs, res, err := stream(t, agentWith(p), "hi", loop.WithRetry(zeroRetry(5)))
		require.NoError(t, err)
		require.Equal(t, "ok", res.Output)
		require.Equal(t, 3, p.Calls(), "3 attempts")
		require.Equal(t, []string{"RS(a)", "TS(1)", "TD+", "MC[Txt(ok)]", "TE(1)", "RC"}, sig(evs), "no OD: nothing was streamed")
	}},
	{"S59_output_discarded", func(t *testing.T) {
		p := scripted.New([]scripted.Step{{Text: "final answer", FailTimes: 1, Partial: "partial-"}})
		evs, res, err := stream(t, agentWith(p), "hi", loop.WithRetry(zeroRetry(3)))
		require.NoError(t, err)
		require.Equal(t, "final answer", res.Output)
		require.Equal(t, 2, p.Calls())
		require.Equal(t, []string{"RS(a)", "TS(1)", "TD+", "OD", "TD+", "MC[Txt(final answer)]", "TE(1)", "RC"}, sig(evs))
		d := deltaTexts(evs)
		require.Equal(t, []string{"partial-", "<OD>"}, d[:2])
		require.Equal(t, "final answer", strings.Join(d[2:], ""))
		for _, e := range res.Entries {
			require.NotContains(t, entrySig(e), "partial-")
		}
		require.Equal(t, []string{"In(user,hi)", "Txt(final answer)"}, entrySigs(res.Entries))
	}},
	{"S61_no_restart_on_partial", func(t *testing.T) {
		p := scripted.New([]scripted.Step{{Text: "final answer", FailTimes: 1, Partial: "partial-"}})
		retry := zeroRetry(3)
		retry.NoRestartOnPartial = true
		evs, res, err := stream(t, agentWith(p), "hi", loop.WithRetry(retry))
		require.Nil(t, res)
		requireErrType(t, err, "ProviderError", "")
		require.Equal(t, 1, p.Calls(), "one attempt")
		require.Equal(t, []string{"RS(a)", "TS(1)", "TD+", "RF(ProviderError)"}, sig(evs))
	}},
	{"S62_exhaustion", func(t *testing.T) {
		p := scripted.New([]scripted.Step{{Text: "never", FailTimes: 1000, Partial: "partial-"}})
		h := newRunner().Stream(context.Background(), agentWith(p), []loop.Entry{loop.UserText("hi")}, loop.WithRetry(zeroRetry(3)))
		evs, res, err := collect(h)
		require.Nil(t, res)
		requireErrType(t, err, "ProviderError", "")
		require.Equal(t, 3, p.Calls())
		require.Equal(t, []string{"RS(a)", "TS(1)", "TD+", "OD", "TD+", "OD", "TD+", "RF(ProviderError)"}, sig(evs))
		require.Len(t, find[*loop.OutputDiscarded](evs), 2, "a final give-up emits no orphan reset")
		require.Equal(t, []string{"partial-", "<OD>", "partial-", "<OD>", "partial-"}, deltaTexts(evs))
		// result() raises the same ProviderError (also when awaited again).
		_, err2 := h.Result()
		require.Equal(t, err, err2)
	}},
}
