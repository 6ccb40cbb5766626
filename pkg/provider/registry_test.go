package provider_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/provider"
	"github.com/lovia-fleet/lovia/pkg/provider/anthropic"
	"github.com/lovia-fleet/lovia/pkg/provider/demo"
	"github.com/lovia-fleet/lovia/pkg/provider/internal/providertest"
	"github.com/lovia-fleet/lovia/pkg/provider/openai"
)

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestRegistry(t *testing.T) {
	t.Parallel()

	t.Run("builtin_prefixes", func(t *testing.T) {
		t.Parallel()
		r := provider.NewRegistry(provider.Config{})
		require.Equal(t, []string{"", "anthropic", "claude", "demo", "oai", "openai", "openai-chat"}, r.Prefixes())
	})

	t.Run("model_strings", func(t *testing.T) {
		t.Parallel()
		r := provider.NewRegistry(provider.Config{Getenv: env(map[string]string{
			"OPENAI_BASE_URL": "http://localhost:11434/v1", "ANTHROPIC_BASE_URL": "https://gw.example.com",
		})})
		for spec, want := range map[string]loop.ProviderInfo{
			"openai:gpt-4.1-mini":       {Name: "openai", Model: "gpt-4.1-mini", Endpoint: "http://localhost:11434/v1", Vision: true},
			"openai-chat:gpt-4.1":       {Name: "openai", Model: "gpt-4.1", Endpoint: "http://localhost:11434/v1", Vision: true},
			"oai:llama3.1:8b":           {Name: "openai", Model: "llama3.1:8b", Endpoint: "http://localhost:11434/v1", Vision: true},
			"qwen3":                     {Name: "openai", Model: "qwen3", Endpoint: "http://localhost:11434/v1", Vision: true},
			"anthropic:claude-opus-4-1": {Name: "anthropic", Model: "claude-opus-4-1", Endpoint: "https://gw.example.com", Vision: true},
			"claude:claude-haiku-4-5":   {Name: "anthropic", Model: "claude-haiku-4-5", Endpoint: "https://gw.example.com", Vision: true},
			"demo":                      {Name: "demo", Model: "demo", Endpoint: "offline"},
			"demo:slow":                 {Name: "demo", Model: "slow", Endpoint: "offline"},
		} {
			p, err := r.Resolve(spec)
			require.NoError(t, err, spec)
			require.Equal(t, want, p.Info(), spec)
		}
	})

	t.Run("environment_and_explicit_fields", func(t *testing.T) {
		t.Parallel()
		e := env(map[string]string{"OPENAI_API_KEY": "sk-env", "ANTHROPIC_API_KEY": "sk-ant-env"})
		r := provider.NewRegistry(provider.Config{Getenv: e})
		p, err := r.Resolve("openai:gpt-4.1")
		require.NoError(t, err)
		cfg := p.(*openai.Provider).Config()
		require.Equal(t, "sk-env", cfg.APIKey)
		require.Equal(t, openai.DefaultBaseURL, cfg.BaseURL)
		require.True(t, *cfg.NativeJSONSchema, "the official host gets native structured output")
		a, err := r.Resolve("anthropic:claude-sonnet-4-5")
		require.NoError(t, err)
		require.Equal(t, "sk-ant-env", a.(*anthropic.Provider).Config().APIKey)

		r = provider.NewRegistry(provider.Config{Getenv: e, OpenAI: openai.Config{APIKey: "sk-explicit", BaseURL: "http://vllm:8000/v1"}})
		p, err = r.Resolve("openai:m")
		require.NoError(t, err)
		cfg = p.(*openai.Provider).Config()
		require.Equal(t, "sk-explicit", cfg.APIKey, "explicit fields win")
		require.Equal(t, "http://vllm:8000/v1", cfg.BaseURL)
	})

	t.Run("one_provider_per_model", func(t *testing.T) {
		t.Parallel()
		r := provider.NewRegistry(provider.Config{})
		p1, err := r.Resolve("openai:gpt-4.1")
		require.NoError(t, err)
		p2, err := r.Resolve("oai:gpt-4.1")
		require.NoError(t, err)
		p3, err := r.Resolve("openai:gpt-4.1-mini")
		require.NoError(t, err)
		require.Same(t, p1, p2, "the same model shares one provider (pool, memoized window)")
		require.NotSame(t, p1, p3)
		a, err := r.Resolve("claude:x")
		require.NoError(t, err)
		require.Same(t, p1.(*openai.Provider).Config().HTTPClient, a.(*anthropic.Provider).Config().HTTPClient, "one HTTP client per registry")
	})

	t.Run("errors", func(t *testing.T) {
		t.Parallel()
		r := provider.NewRegistry(provider.Config{})
		_, err := r.Resolve("openai:")
		require.ErrorIs(t, err, loop.ErrUser)
		require.ErrorContains(t, err, "Config.Model")
		_, err = r.Resolve("gemini:flash")
		require.ErrorIs(t, err, loop.ErrUser)
		require.ErrorContains(t, err, `unknown model "gemini:flash"`)
		_, err = provider.NewRegistry(provider.Config{OpenAI: openai.Config{BaseURL: "localhost:8000"}}).Resolve("x")
		require.ErrorContains(t, err, "Config.BaseURL")
	})

	t.Run("users_add_prefixes", func(t *testing.T) {
		t.Parallel()
		r := provider.NewRegistry(provider.Config{})
		r.Register("local", func(model string) (loop.Provider, error) {
			return openai.New(openai.Config{Model: model, BaseURL: "http://127.0.0.1:8080/v1"})
		})
		p, err := r.Resolve("local:phi-4")
		require.NoError(t, err)
		require.Equal(t, "http://127.0.0.1:8080/v1", p.Info().Endpoint)
	})

	t.Run("keyless_local_endpoint_from_the_environment", func(t *testing.T) {
		t.Parallel()
		srv := providertest.NewServer(t, providertest.SSE(providertest.Fixture(t, "../openai/testdata/text.sse")))
		r := provider.NewRegistry(provider.Config{Getenv: env(map[string]string{"OPENAI_BASE_URL": srv.URL + "/v1"}), HTTPClient: srv.Client()})
		p, err := r.Resolve("llama3")
		require.NoError(t, err)
		rec := &providertest.Recorder{}
		require.NoError(t, p.Stream(context.Background(), &loop.ModelRequest{Entries: []loop.Entry{loop.UserText("hi")}}, rec.Emit))
		require.Equal(t, "Hello! How can I help?", rec.Text())
		req := srv.Requests()[0]
		require.Empty(t, req.Header.Get("Authorization"))
		require.Equal(t, "llama3", req.JSON(t)["model"])
	})

	t.Run("demo_config", func(t *testing.T) {
		t.Parallel()
		r := provider.NewRegistry(provider.Config{Demo: demo.Config{Model: "demo-x"}})
		p, err := r.Resolve("demo")
		require.NoError(t, err)
		require.Equal(t, "demo-x", p.Info().Model)
	})
}
