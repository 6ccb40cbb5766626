package demo_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/provider"
	"github.com/lovia-fleet/lovia/pkg/provider/internal/providertest"
)

type calcIn struct {
	Expression string `json:"expression"`
}

type none struct{}

// Stand-ins for the worker's built-in tools of the same names.
func calculator() *loop.Tool {
	return loop.NewTool("calculator", "Evaluate an arithmetic expression.", func(_ context.Context, _ *loop.RunContext, in calcIn) (string, error) {
		switch in.Expression {
		case "12*7":
			return "84", nil
		case "6*7":
			return "42", nil
		case "1/0":
			return "", errors.New("division by zero")
		}
		return "", errors.New("unsupported in this test: " + strconv.Quote(in.Expression))
	})
}

func timeNow() *loop.Tool {
	return loop.NewTool("time_now", "The current time.", func(_ context.Context, _ *loop.RunContext, _ none) (string, error) {
		return "2026-11-30T09:00:00Z", nil
	})
}

func runDemo(t *testing.T, input string) ([]loop.Event, *loop.RunResult, error) {
	t.Helper()
	runner := loop.NewRunner(loop.RunnerConfig{Registry: provider.NewRegistry(provider.Config{})})
	agent := &loop.Agent{Name: "demo", Instructions: "You are a helpful assistant.", Model: "demo", Tools: []*loop.Tool{calculator(), timeNow()}}
	h := runner.Stream(context.Background(), agent, []loop.Entry{loop.UserText(input)})
	var evs []loop.Event
	for ev := range h.Events() {
		evs = append(evs, ev)
	}
	res, err := h.Result()
	return evs, res, err
}

func TestDemoThroughTheLoop(t *testing.T) {
	t.Parallel()

	t.Run("calculator_flow", func(t *testing.T) {
		t.Parallel()
		evs, res, err := runDemo(t, "What is 12*7?")
		require.NoError(t, err)
		require.Equal(t, "12*7 = 84.", res.Output)
		require.Equal(t, 2, res.Turns)
		require.Equal(t, []string{"In(user,What is 12*7?)", `Call(demo_call_1,calculator,{"expression":"12*7"})`, "Res(demo_call_1,84)", "Txt(12*7 = 84.)"}, providertest.EntrySigs(res.Entries))
		require.Equal(t, []string{"RS(demo)", "TS(1)", `MC[Call(demo_call_1,calculator,{"expression":"12*7"})]`, "TCS(demo_call_1)", "TCC(demo_call_1,ok)", "TE(1)",
			"TS(2)", "TD+", "MC[Txt(12*7 = 84.)]", "TE(2)", "RC"}, providertest.Sig(evs))
		require.Equal(t, []string{"12*7", " =", " 84."}, providertest.DeltaTexts(evs), "streamed word by word")
		require.Positive(t, res.Usage.InputTokens)
		require.Positive(t, res.Usage.OutputTokens)
		require.Equal(t, "stop", *res.FinishReason)
	})

	t.Run("time_flow", func(t *testing.T) {
		t.Parallel()
		_, res, err := runDemo(t, "What time is it?")
		require.NoError(t, err)
		require.Equal(t, "The current time is 2026-11-30T09:00:00Z.", res.Output)
		require.Equal(t, []string{"In(user,What time is it?)", "Call(demo_call_1,time_now,{})", "Res(demo_call_1,2026-11-30T09:00:00Z)", "Txt(The current time is 2026-11-30T09:00:00Z.)"}, providertest.EntrySigs(res.Entries))
	})

	t.Run("both_in_parallel", func(t *testing.T) {
		t.Parallel()
		_, res, err := runDemo(t, "What is 6*7, and what time is it?")
		require.NoError(t, err)
		require.Equal(t, "6*7 = 42. The current time is 2026-11-30T09:00:00Z.", res.Output)
	})

	t.Run("tool_error", func(t *testing.T) {
		t.Parallel()
		_, res, err := runDemo(t, "What is 1/0?")
		require.NoError(t, err)
		require.Equal(t, "I could not compute 1/0: Tool error: division by zero.", res.Output)
	})

	t.Run("plain_question", func(t *testing.T) {
		t.Parallel()
		_, res, err := runDemo(t, "Who are you?")
		require.NoError(t, err)
		require.Equal(t, 1, res.Turns)
		require.Contains(t, res.Output, "offline demo model")
	})
}
