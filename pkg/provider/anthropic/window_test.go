package anthropic_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/provider/anthropic"
	"github.com/lovia-fleet/lovia/pkg/provider/internal/providertest"
)

const modelInfo = `{"type":"model","id":"claude-sonnet-4-5-20250929","display_name":"Claude Sonnet 4.5","created_at":"2025-09-29T00:00:00Z","max_input_tokens":200000,"max_tokens":64000}`

func TestDiscoverContextWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("models_api_memoized", func(t *testing.T) {
		t.Parallel()
		p, srv := setup(t, nil, providertest.Response{Body: modelInfo})
		for range 2 {
			n, err := p.DiscoverContextWindow(ctx)
			require.NoError(t, err)
			require.Equal(t, 200000, n)
		}
		reqs := srv.Requests()
		require.Len(t, reqs, 1, "memoized per endpoint and model")
		require.Equal(t, "GET", reqs[0].Method)
		require.Equal(t, "/v1/models/claude-sonnet-4-5", reqs[0].Path)
	})

	t.Run("unknown_model_is_zero", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil, providertest.JSONError(http.StatusNotFound, `{"type":"error","error":{"type":"not_found_error","message":"model: x"}}`))
		n, err := p.DiscoverContextWindow(ctx)
		require.NoError(t, err)
		require.Zero(t, n)
	})

	t.Run("configured_window_asks_nothing", func(t *testing.T) {
		t.Parallel()
		p, srv := setup(t, func(c *anthropic.Config) { c.ContextWindow = 100000 })
		n, err := p.DiscoverContextWindow(ctx)
		require.NoError(t, err)
		require.Equal(t, 100000, n)
		require.Empty(t, srv.Requests())
	})

	t.Run("failure_is_not_memoized", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil, providertest.JSONError(http.StatusInternalServerError, `{"type":"error","error":{"type":"api_error","message":"boom"}}`), providertest.Response{Body: modelInfo})
		_, err := p.DiscoverContextWindow(ctx)
		require.True(t, providerError(t, err).IsRetryable())
		n, err := p.DiscoverContextWindow(ctx)
		require.NoError(t, err)
		require.Equal(t, 200000, n)
	})

	t.Run("overflow_rejection_caps_the_window", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil,
			providertest.JSONError(http.StatusBadRequest, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 150000 tokens > 100000 maximum"}}`),
			providertest.Response{Body: modelInfo})
		_, err := streamOnce(t, p, nil)
		require.Error(t, err)
		n, err := p.DiscoverContextWindow(ctx)
		require.NoError(t, err)
		require.Equal(t, 100000, n)
	})
}
