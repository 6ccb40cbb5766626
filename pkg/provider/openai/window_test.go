package openai_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/provider/internal/providertest"
	"github.com/lovia-fleet/lovia/pkg/provider/openai"
)

const vllmModels = `{"object":"list","data":[
	{"id":"Qwen/Qwen3-8B","object":"model","created":1735689600,"owned_by":"vllm","root":"Qwen/Qwen3-8B","parent":null,"max_model_len":32768,"permission":[]},
	{"id":"gpt-4.1-mini","object":"model","created":1735689600,"owned_by":"vllm","root":"gpt-4.1-mini","parent":null,"max_model_len":131072,"permission":[]}]}`

func TestDiscoverContextWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("max_model_len_memoized", func(t *testing.T) {
		t.Parallel()
		p, srv := setup(t, nil, providertest.Response{Body: vllmModels})
		for range 2 {
			n, err := p.DiscoverContextWindow(ctx)
			require.NoError(t, err)
			require.Equal(t, 131072, n)
		}
		reqs := srv.Requests()
		require.Len(t, reqs, 1, "memoized per endpoint and model")
		require.Equal(t, "GET", reqs[0].Method)
		require.Equal(t, "/v1/models", reqs[0].Path)
	})

	t.Run("context_length_field", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil, providertest.Response{Body: `{"data":[{"id":"gpt-4.1-mini","context_length":1047576}]}`})
		n, err := p.DiscoverContextWindow(ctx)
		require.NoError(t, err)
		require.Equal(t, 1047576, n)
	})

	t.Run("unpublished_is_zero", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil, providertest.Response{Body: `{"object":"list","data":[{"id":"gpt-4.1-mini","object":"model","created":1,"owned_by":"system"}]}`})
		n, err := p.DiscoverContextWindow(ctx)
		require.NoError(t, err)
		require.Zero(t, n)
	})

	t.Run("no_listing_is_zero", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil, providertest.JSONError(http.StatusNotFound, `{"error":"not found"}`))
		n, err := p.DiscoverContextWindow(ctx)
		require.NoError(t, err)
		require.Zero(t, n)
	})

	t.Run("configured_window_asks_nothing", func(t *testing.T) {
		t.Parallel()
		p, srv := setup(t, func(c *openai.Config) { c.ContextWindow = 8192 })
		n, err := p.DiscoverContextWindow(ctx)
		require.NoError(t, err)
		require.Equal(t, 8192, n)
		require.Empty(t, srv.Requests())
	})

	t.Run("failure_is_not_memoized", func(t *testing.T) {
		t.Parallel()
		p, srv := setup(t, nil, providertest.JSONError(http.StatusBadGateway, `{"error":{"message":"upstream down"}}`), providertest.Response{Body: vllmModels})
		_, err := p.DiscoverContextWindow(ctx)
		require.True(t, providerError(t, err).IsRetryable())
		n, err := p.DiscoverContextWindow(ctx)
		require.NoError(t, err)
		require.Equal(t, 131072, n)
		require.Len(t, srv.Requests(), 2)
	})

	t.Run("overflow_rejection_caps_the_window", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil,
			providertest.JSONError(http.StatusBadRequest, `{"error":{"message":"This model's maximum context length is 65536 tokens. However, your messages resulted in 70000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}`),
			providertest.Response{Body: vllmModels})
		_, err := streamOnce(t, p, nil)
		require.Error(t, err)
		n, err := p.DiscoverContextWindow(ctx)
		require.NoError(t, err)
		require.Equal(t, 65536, n)
	})
}
