package openai_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/provider/internal/providertest"
	"github.com/lovia-fleet/lovia/pkg/provider/openai"
)

// TestLive is a smoke test against a real endpoint. It runs only when
// OPENAI_API_KEY is set; OPENAI_BASE_URL and LOVIA_LIVE_OPENAI_MODEL
// (default gpt-4.1-mini) pick the endpoint and the model.
func TestLive(t *testing.T) {
	key := os.Getenv("OPENAI_API_KEY")
	if key == "" {
		t.Skip("set OPENAI_API_KEY (and optionally OPENAI_BASE_URL, LOVIA_LIVE_OPENAI_MODEL) to run the live smoke test")
	}
	model := os.Getenv("LOVIA_LIVE_OPENAI_MODEL")
	if model == "" {
		model = "gpt-4.1-mini"
	}
	p, err := openai.New(openai.Config{Model: model, APIKey: key, BaseURL: os.Getenv("OPENAI_BASE_URL")})
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
}
