package demo_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/provider/demo"
	"github.com/lovia-fleet/lovia/pkg/provider/internal/providertest"
)

var tools = []loop.ToolSchema{{Name: "calculator"}, {Name: "time_now"}}

func run(t *testing.T, entries []loop.Entry, tools []loop.ToolSchema) *providertest.Recorder {
	t.Helper()
	p, err := demo.New(demo.Config{})
	require.NoError(t, err)
	rec := &providertest.Recorder{}
	require.NoError(t, p.Stream(context.Background(), &loop.ModelRequest{Entries: entries, Tools: tools}, rec.Emit))
	return rec
}

func TestDemo(t *testing.T) {
	t.Parallel()

	t.Run("arithmetic_calls_the_calculator", func(t *testing.T) {
		t.Parallel()
		for q, expr := range map[string]string{
			"What is 12*7?":               "12*7",
			"what's 12 * 7":               "12*7",
			"Compute (3 + 4) * 2, please": "(3+4)*2",
			"What is 12 times 7?":         "12*7",
			"what is 2^10?":               "2^10",
			"-3 + 2":                      "-3+2",
			"What is 10 divided by 4?":    "10/4",
		} {
			rec := run(t, []loop.Entry{loop.UserText(q)}, tools)
			require.Equal(t, []loop.Entry{loop.ToolCallEntry("demo_call_1", "calculator", `{"expression":"`+expr+`"}`)}, rec.Calls(), q)
			require.Equal(t, "tool_calls", rec.Finish())
			require.Empty(t, rec.Text())
		}
	})

	t.Run("time_question_calls_time_now", func(t *testing.T) {
		t.Parallel()
		for _, q := range []string{"What time is it?", "what's the date today", "Can you check the clock?"} {
			rec := run(t, []loop.Entry{loop.UserText(q)}, tools)
			require.Equal(t, []loop.Entry{loop.ToolCallEntry("demo_call_1", "time_now", `{}`)}, rec.Calls(), q)
		}
	})

	t.Run("both_questions_call_both_tools", func(t *testing.T) {
		t.Parallel()
		rec := run(t, []loop.Entry{loop.UserText("What is 6*7 and what time is it?")}, tools)
		require.Equal(t, []loop.Entry{
			loop.ToolCallEntry("demo_call_1", "calculator", `{"expression":"6*7"}`),
			loop.ToolCallEntry("demo_call_2", "time_now", `{}`),
		}, rec.Calls())
	})

	t.Run("answers_from_the_tool_result", func(t *testing.T) {
		t.Parallel()
		rec := run(t, []loop.Entry{
			loop.UserText("What is 12*7?"),
			loop.ToolCallEntry("demo_call_1", "calculator", `{"expression":"12*7"}`),
			loop.ToolResultEntry("demo_call_1", "calculator", "84", false),
		}, tools)
		require.Equal(t, "12*7 = 84.", rec.Text())
		require.Equal(t, []string{"12*7", " =", " 84."}, texts(rec), "streams word by word")
		require.Equal(t, "stop", rec.Finish())
		u := rec.Usage()
		require.Positive(t, u.InputTokens)
		require.Positive(t, u.OutputTokens)
		require.Equal(t, u.InputTokens+u.OutputTokens, u.TotalTokens)
	})

	t.Run("answers_from_parallel_results_in_call_order", func(t *testing.T) {
		t.Parallel()
		rec := run(t, []loop.Entry{
			loop.UserText("What is 6*7 and what time is it?"),
			loop.ToolCallEntry("demo_call_1", "calculator", `{"expression":"6*7"}`),
			loop.ToolCallEntry("demo_call_2", "time_now", `{}`),
			loop.ToolResultEntry("demo_call_2", "time_now", `"2026-11-30T09:00:00Z"`, false),
			loop.ToolResultEntry("demo_call_1", "calculator", "42", false),
		}, tools)
		require.Equal(t, "6*7 = 42. The current time is 2026-11-30T09:00:00Z.", rec.Text(), "call order, not completion order")
	})

	t.Run("tool_error_is_reported", func(t *testing.T) {
		t.Parallel()
		rec := run(t, []loop.Entry{
			loop.UserText("What is 1/0?"),
			loop.ToolCallEntry("demo_call_1", "calculator", `{"expression":"1/0"}`),
			loop.ToolResultEntry("demo_call_1", "calculator", "Tool error: division by zero", true),
		}, tools)
		require.Equal(t, "I could not compute 1/0: Tool error: division by zero.", rec.Text())
	})

	t.Run("without_a_calculator_it_computes_itself", func(t *testing.T) {
		t.Parallel()
		rec := run(t, []loop.Entry{loop.UserText("What is 1.5*4?")}, nil)
		require.Empty(t, rec.Calls())
		require.Contains(t, rec.Text(), "1.5*4 = 6.")
	})

	t.Run("anything_else_says_it_is_a_demo", func(t *testing.T) {
		t.Parallel()
		rec := run(t, []loop.Entry{loop.SystemText("be nice"), loop.UserText("Tell me about NATS.")}, tools)
		require.Contains(t, rec.Text(), `You said: "Tell me about NATS."`)
		require.Contains(t, rec.Text(), "offline demo model")
		require.Contains(t, rec.Text(), "calculator tool")
		require.Empty(t, rec.Calls())
		require.Equal(t, "stop", rec.Finish())
		hello := run(t, []loop.Entry{loop.UserText("Hello!")}, nil)
		require.Contains(t, hello.Text(), "Hello! I am the offline demo model")
	})

	t.Run("deterministic", func(t *testing.T) {
		t.Parallel()
		in := []loop.Entry{loop.UserText("Tell me a story")}
		require.Equal(t, run(t, in, tools).Deltas, run(t, in, tools).Deltas)
	})

	t.Run("call_ids_are_unique_in_the_view", func(t *testing.T) {
		t.Parallel()
		rec := run(t, []loop.Entry{
			loop.UserText("What is 1+1?"),
			loop.ToolCallEntry("demo_call_1", "calculator", `{"expression":"1+1"}`),
			loop.ToolResultEntry("demo_call_1", "calculator", "2", false),
			loop.AssistantText("1+1 = 2."),
			loop.UserText("And 2+2?"),
		}, tools)
		require.Equal(t, "demo_call_2", rec.Calls()[0].CallID)
	})

	t.Run("word_delay_honours_cancellation", func(t *testing.T) {
		t.Parallel()
		p, err := demo.New(demo.Config{WordDelay: time.Hour})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		n := 0
		err = p.Stream(ctx, &loop.ModelRequest{Entries: []loop.Entry{loop.UserText("hello there friend")}}, func(loop.Delta) error {
			n++
			cancel()
			return nil
		})
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, 1, n)
	})

	t.Run("info_and_config", func(t *testing.T) {
		t.Parallel()
		p, err := demo.New(demo.Config{})
		require.NoError(t, err)
		require.Equal(t, loop.ProviderInfo{Name: "demo", Model: "demo", Endpoint: "offline"}, p.Info())
		_, err = demo.New(demo.Config{WordDelay: -1})
		require.ErrorContains(t, err, "Config.WordDelay")
	})
}

func texts(r *providertest.Recorder) []string {
	var out []string
	for _, d := range r.Deltas {
		if d.Kind == loop.DeltaText {
			out = append(out, d.Text)
		}
	}
	return out
}
