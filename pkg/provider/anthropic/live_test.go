package anthropic_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/provider/anthropic"
	"github.com/lovia-fleet/lovia/pkg/provider/internal/providertest"
)

// TestLive is a smoke test against a real endpoint. It runs only when
// ANTHROPIC_API_KEY is set; ANTHROPIC_BASE_URL and LOVIA_LIVE_ANTHROPIC_MODEL
// (default claude-haiku-4-5) pick the endpoint and the model.
func TestLive(t *testing.T) {
	key := os.Getenv("ANTHROPIC_API_KEY")
	if key == "" {
		t.Skip("set ANTHROPIC_API_KEY (and optionally ANTHROPIC_BASE_URL, LOVIA_LIVE_ANTHROPIC_MODEL) to run the live smoke test")
	}
	model := os.Getenv("LOVIA_LIVE_ANTHROPIC_MODEL")
	if model == "" {
		model = "claude-haiku-4-5"
	}
	p, err := anthropic.New(anthropic.Config{Model: model, APIKey: key, BaseURL: os.Getenv("ANTHROPIC_BASE_URL"), MaxTokens: 1024})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("text", func(t *testing.T) {
		rec := &providertest.Recorder{}
		err := p.Stream(ctx, &loop.ModelRequest{Entries: []loop.Entry{loop.UserText("Reply with the single word: pong")}}, rec.Emit)
		require.NoError(t, err)
		require.Contains(t, rec.Text(), "pong")
		require.Equal(t, "stop", rec.Finish())
		require.Positive(t, rec.Usage().InputTokens)
	})

	t.Run("tool_round_trip", func(t *testing.T) {
		add := loop.NewTool("add", "Add two integers.", func(_ context.Context, _ *loop.RunContext, in struct {
			A int `json:"a"`
			B int `json:"b"`
		}) (int, error) {
			return in.A + in.B, nil
		})
		a := &loop.Agent{Name: "live", Instructions: "Use the add tool for arithmetic.", Provider: p, Tools: []*loop.Tool{add}}
		res, err := loop.NewRunner(loop.RunnerConfig{}).Run(ctx, a, []loop.Entry{loop.UserText("What is 1234 + 4321? Use the tool.")})
		require.NoError(t, err)
		require.Contains(t, res.Text(), "5555")
	})

	t.Run("context_window", func(t *testing.T) {
		n, err := p.DiscoverContextWindow(ctx)
		require.NoError(t, err)
		require.Positive(t, n)
	})
}
