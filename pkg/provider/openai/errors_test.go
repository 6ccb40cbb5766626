package openai_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/provider/internal/providertest"
	"github.com/lovia-fleet/lovia/pkg/provider/openai"
)

const (
	rateLimitBody = `{"error":{"message":"Rate limit reached for gpt-4.1-mini in organization org-x on tokens per min (TPM): Limit 200000, Used 199500, Requested 1200. Please try again in 7s.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`
	overflowBody  = `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130542 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`
	authBody      = `{"error":{"message":"Incorrect API key provided: sk-test. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
)

func TestErrors(t *testing.T) {
	t.Parallel()

	t.Run("429_with_retry_after_then_success", func(t *testing.T) {
		t.Parallel()
		p, srv := setup(t, nil,
			providertest.JSONError(http.StatusTooManyRequests, rateLimitBody, "Retry-After", "7"),
			fixture(t, "text.sse"))
		_, err := streamOnce(t, p, nil)
		pe := providerError(t, err)
		require.Equal(t, loop.Retryable, pe.Retryable)
		require.Equal(t, 7*time.Second, pe.RetryAfter)
		require.Equal(t, http.StatusTooManyRequests, pe.StatusCode)
		require.Equal(t, "openai", pe.Vendor)
		require.Contains(t, pe.Message, "Rate limit reached")

		rec, err := streamOnce(t, p, nil)
		require.NoError(t, err)
		require.Equal(t, "Hello! How can I help?", rec.Text())
		require.Len(t, srv.Requests(), 2, "the SDK's own retries are off")
	})

	t.Run("retry_after_ms", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil, providertest.JSONError(http.StatusServiceUnavailable, `{"error":{"message":"overloaded"}}`, "retry-after-ms", "1500"))
		_, err := streamOnce(t, p, nil)
		pe := providerError(t, err)
		require.True(t, pe.IsRetryable())
		require.Equal(t, 1500*time.Millisecond, pe.RetryAfter)
	})

	t.Run("stream_cut_mid_way", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil, providertest.Cut(t, providertest.Fixture(t, "text.sse"), `" can"`))
		rec, err := streamOnce(t, p, nil)
		pe := providerError(t, err)
		require.Equal(t, loop.Retryable, pe.Retryable)
		require.ErrorIs(t, err, openai.ErrStreamTruncated)
		require.Equal(t, "Hello! How", rec.Text(), "what arrived before the cut was streamed")
		require.Zero(t, rec.Count(loop.DeltaFinish))
	})

	t.Run("clean_eof_without_finish", func(t *testing.T) {
		t.Parallel()
		sse := `data: {"id":"1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"par"},"finish_reason":null}]}

`
		p, _ := setup(t, nil, providertest.SSE(sse))
		_, err := streamOnce(t, p, nil)
		require.ErrorIs(t, err, openai.ErrStreamTruncated)
		require.True(t, providerError(t, err).IsRetryable())
	})

	t.Run("context_length_400", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil, providertest.JSONError(http.StatusBadRequest, overflowBody))
		_, err := streamOnce(t, p, nil)
		var co *loop.ContextOverflowError
		require.ErrorAs(t, err, &co)
		require.Equal(t, 128000, co.ReportedWindow)
		require.Contains(t, co.Message, "maximum context length is 128000")
		require.ErrorIs(t, err, loop.ErrContextOverflow)
		require.NotErrorIs(t, err, loop.ErrProvider, "an overflow is not a ProviderError")
	})

	t.Run("context_length_vllm_and_llamacpp", func(t *testing.T) {
		t.Parallel()
		for body, want := range map[string]int{
			`{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5023 tokens (4023 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`: 4096,
			`{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":8192}}`:                                                                                                    8192,
		} {
			p, _ := setup(t, nil, providertest.JSONError(http.StatusBadRequest, body))
			_, err := streamOnce(t, p, nil)
			var co *loop.ContextOverflowError
			require.ErrorAs(t, err, &co, body)
			require.Equal(t, want, co.ReportedWindow)
		}
	})

	t.Run("401_is_clear_and_not_retried", func(t *testing.T) {
		t.Parallel()
		p, srv := setup(t, nil, providertest.JSONError(http.StatusUnauthorized, authBody))
		_, err := streamOnce(t, p, nil)
		pe := providerError(t, err)
		require.Equal(t, loop.NotRetryable, pe.Retryable)
		require.Equal(t, http.StatusUnauthorized, pe.StatusCode)
		require.Contains(t, pe.Message, "Incorrect API key provided")
		require.Contains(t, pe.Hint, "OPENAI_API_KEY")
		require.Contains(t, pe.Hint, "OPENAI_BASE_URL")
		require.Len(t, srv.Requests(), 1)
		require.Equal(t, "Bearer sk-test", srv.Requests()[0].Header.Get("Authorization"))
	})

	t.Run("401_without_key_says_to_set_one", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, func(c *openai.Config) { c.APIKey = "" }, providertest.JSONError(http.StatusUnauthorized, authBody))
		_, err := streamOnce(t, p, nil)
		require.Contains(t, providerError(t, err).Hint, "requires an API key: set OPENAI_API_KEY")
	})

	t.Run("missing_key_on_the_official_host", func(t *testing.T) {
		t.Parallel()
		called := false
		p, err := openai.New(openai.Config{Model: "gpt-4.1-mini", HTTPClient: &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
			called = true
			return nil, context.Canceled
		})}})
		require.NoError(t, err)
		_, err = streamOnce(t, p, nil)
		pe := providerError(t, err)
		require.ErrorIs(t, err, openai.ErrMissingAPIKey)
		require.Equal(t, loop.NotRetryable, pe.Retryable)
		require.Contains(t, pe.Hint, "set OPENAI_API_KEY")
		require.False(t, called, "no request is sent")
	})

	t.Run("404_points_at_the_base_url", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, func(c *openai.Config) { c.BaseURL = c.BaseURL[:len(c.BaseURL)-3] }, providertest.JSONError(http.StatusNotFound, `{"detail":"Not Found"}`))
		_, err := streamOnce(t, p, nil)
		pe := providerError(t, err)
		require.Equal(t, loop.NotRetryable, pe.Retryable)
		require.Contains(t, pe.Message, "Not Found")
		require.Contains(t, pe.Hint, "base URL")
		require.Contains(t, pe.Hint, "/v1")
	})

	t.Run("insufficient_quota_is_not_retried", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil, providertest.JSONError(http.StatusTooManyRequests, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`))
		_, err := streamOnce(t, p, nil)
		pe := providerError(t, err)
		require.Equal(t, loop.NotRetryable, pe.Retryable)
		require.Contains(t, pe.Hint, "billing")
	})

	t.Run("500_is_retryable", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil, providertest.JSONError(http.StatusInternalServerError, `{"error":{"message":"The server had an error","type":"server_error"}}`))
		_, err := streamOnce(t, p, nil)
		pe := providerError(t, err)
		require.Equal(t, loop.Retryable, pe.Retryable)
		require.Zero(t, pe.RetryAfter)
	})

	t.Run("connection_refused_is_retryable", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		p, err := openai.New(openai.Config{Model: "m", BaseURL: "http://" + addr + "/v1", HTTPClient: &http.Client{Transport: &http.Transport{}}})
		require.NoError(t, err)
		_, err = streamOnce(t, p, nil)
		pe := providerError(t, err)
		require.Equal(t, loop.Retryable, pe.Retryable)
		require.Contains(t, pe.Hint, "nothing accepts connections")
	})

	t.Run("idle_stream_times_out", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte(`data: {"id":"1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}` + "\n\n"))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(release) })
		p, err := openai.New(openai.Config{Model: "m", BaseURL: srv.URL, HTTPClient: srv.Client(), IdleTimeout: 50 * time.Millisecond})
		require.NoError(t, err)
		_, err = streamOnce(t, p, nil)
		pe := providerError(t, err)
		require.Equal(t, loop.Retryable, pe.Retryable)
		require.ErrorIs(t, err, openai.ErrIdleTimeout)
		require.Contains(t, pe.Message, "timed out after 50ms")
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
