package anthropic_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/provider/anthropic"
	"github.com/lovia-fleet/lovia/pkg/provider/internal/providertest"
)

const (
	rateLimitBody = `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 30,000 input tokens per minute."},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`
	overflowBody  = `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fz"}`
	authBody      = `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_011CSHoEeqs5C35K2UUqR7G0"}`
)

func TestErrors(t *testing.T) {
	t.Parallel()

	t.Run("429_with_retry_after_then_success", func(t *testing.T) {
		t.Parallel()
		p, srv := setup(t, nil,
			providertest.JSONError(http.StatusTooManyRequests, rateLimitBody, "Retry-After", "12"),
			fixture(t, "text.sse"))
		_, err := streamOnce(t, p, nil)
		pe := providerError(t, err)
		require.Equal(t, loop.Retryable, pe.Retryable)
		require.Equal(t, 12*time.Second, pe.RetryAfter)
		require.Equal(t, http.StatusTooManyRequests, pe.StatusCode)
		require.Contains(t, pe.Message, "exceed the rate limit")

		rec, err := streamOnce(t, p, nil)
		require.NoError(t, err)
		require.Equal(t, "Hello! How can I help?", rec.Text())
		require.Len(t, srv.Requests(), 2, "the SDK's own retries are off")
	})

	t.Run("529_overloaded_is_retryable", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil, providertest.JSONError(529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
		_, err := streamOnce(t, p, nil)
		require.Equal(t, loop.Retryable, providerError(t, err).Retryable)
	})

	t.Run("stream_cut_mid_way", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil, providertest.Cut(t, providertest.Fixture(t, "text.sse"), `" How can"`))
		rec, err := streamOnce(t, p, nil)
		pe := providerError(t, err)
		require.Equal(t, loop.Retryable, pe.Retryable)
		require.ErrorIs(t, err, anthropic.ErrStreamTruncated)
		require.Equal(t, "Hello!", rec.Text())
		require.Zero(t, rec.Count(loop.DeltaFinish))
	})

	t.Run("clean_eof_before_message_stop", func(t *testing.T) {
		t.Parallel()
		sse := providertest.Fixture(t, "text.sse")
		p, _ := setup(t, nil, providertest.SSE(sse[:len(sse)-len("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")]))
		_, err := streamOnce(t, p, nil)
		require.ErrorIs(t, err, anthropic.ErrStreamTruncated)
		require.True(t, providerError(t, err).IsRetryable())
	})

	t.Run("context_length_400", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil, providertest.JSONError(http.StatusBadRequest, overflowBody))
		_, err := streamOnce(t, p, nil)
		var co *loop.ContextOverflowError
		require.ErrorAs(t, err, &co)
		require.Equal(t, 200000, co.ReportedWindow)
		require.Contains(t, co.Message, "prompt is too long")
		require.NotErrorIs(t, err, loop.ErrProvider)
	})

	t.Run("input_and_max_tokens_exceed_the_limit", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil, providertest.JSONError(http.StatusBadRequest, `{"type":"error","error":{"type":"invalid_request_error","message":"input length and `+"`max_tokens`"+` exceed context limit: 197000 + 8192 > 200000, decrease input length or `+"`max_tokens`"+` and try again"}}`))
		_, err := streamOnce(t, p, nil)
		var co *loop.ContextOverflowError
		require.ErrorAs(t, err, &co)
		require.Equal(t, 200000, co.ReportedWindow)
	})

	t.Run("401_is_clear_and_not_retried", func(t *testing.T) {
		t.Parallel()
		p, srv := setup(t, nil, providertest.JSONError(http.StatusUnauthorized, authBody))
		_, err := streamOnce(t, p, nil)
		pe := providerError(t, err)
		require.Equal(t, loop.NotRetryable, pe.Retryable)
		require.Equal(t, http.StatusUnauthorized, pe.StatusCode)
		require.Contains(t, pe.Message, "invalid x-api-key")
		require.Contains(t, pe.Hint, "ANTHROPIC_API_KEY")
		require.Contains(t, pe.Hint, "ANTHROPIC_BASE_URL")
		require.Len(t, srv.Requests(), 1)
	})

	t.Run("missing_key_on_the_official_host", func(t *testing.T) {
		t.Parallel()
		called := false
		p, err := anthropic.New(anthropic.Config{Model: "claude-sonnet-4-5", HTTPClient: &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
			called = true
			return nil, context.Canceled
		})}})
		require.NoError(t, err)
		_, err = streamOnce(t, p, nil)
		pe := providerError(t, err)
		require.ErrorIs(t, err, anthropic.ErrMissingAPIKey)
		require.Equal(t, loop.NotRetryable, pe.Retryable)
		require.Contains(t, pe.Hint, "set ANTHROPIC_API_KEY")
		require.False(t, called)
	})

	t.Run("keyless_compatible_host", func(t *testing.T) {
		t.Parallel()
		p, srv := setup(t, func(c *anthropic.Config) { c.APIKey = "" }, fixture(t, "text.sse"))
		_, err := streamOnce(t, p, nil)
		require.NoError(t, err)
		h := srv.Requests()[0].Header
		require.Empty(t, h.Get("X-Api-Key"))
		require.Empty(t, h.Get("Authorization"))
	})

	t.Run("404_points_at_the_base_url", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil, providertest.JSONError(http.StatusNotFound, `{"type":"error","error":{"type":"not_found_error","message":"model: claude-nope"}}`))
		_, err := streamOnce(t, p, nil)
		pe := providerError(t, err)
		require.Equal(t, loop.NotRetryable, pe.Retryable)
		require.Contains(t, pe.Hint, "model name")
		require.Contains(t, pe.Hint, "ANTHROPIC_BASE_URL")
	})

	t.Run("idle_stream_times_out", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n"))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(release) })
		p, err := anthropic.New(anthropic.Config{Model: "m", BaseURL: srv.URL, HTTPClient: srv.Client(), IdleTimeout: 50 * time.Millisecond})
		require.NoError(t, err)
		_, err = streamOnce(t, p, nil)
		pe := providerError(t, err)
		require.Equal(t, loop.Retryable, pe.Retryable)
		require.ErrorIs(t, err, anthropic.ErrIdleTimeout)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
