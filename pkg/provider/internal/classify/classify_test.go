package classify_test

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/provider/internal/classify"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var ep = classify.Endpoint{Vendor: "openai", Model: "m", BaseURL: "http://h/v1", KeyEnv: "OPENAI_API_KEY", BaseURLEnv: "OPENAI_BASE_URL", HasKey: true}

func TestParseBody(t *testing.T) {
	t.Parallel()
	for body, want := range map[string][3]string{
		`{"error":{"message":"m","type":"t","code":"c"}}`:                             {"m", "t", "c"},
		`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`: {"Overloaded", "overloaded_error", ""},
		`{"object":"error","message":"m","type":"BadRequestError","code":400}`:        {"m", "BadRequestError", "400"},
		`{"error":{"code":400,"message":"m","type":"exceed_context_size_error"}}`:     {"m", "exceed_context_size_error", "400"},
		`{"error":"model not found"}`:                                                 {"model not found", "", ""},
		`{"detail":"Not Found"}`:                                                      {"Not Found", "", ""},
		`not json`:                                                                    {"", "", ""},
		`[]`:                                                                          {"", "", ""},
	} {
		m, typ, code := classify.ParseBody([]byte(body))
		require.Equal(t, want, [3]string{m, typ, code}, body)
	}
}

func TestContextWindow(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string]int{
		"This model's maximum context length is 128000 tokens. However, your messages resulted in 130542 tokens.":                               128000,
		"This model's maximum context length is 128,000 tokens.":                                                                                128000,
		"The decoder prompt (length 5000) is longer than the maximum model length of 4096.":                                                     4096,
		"Trying to keep the first 5000 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens": 4096,
		"prompt is too long: 208310 tokens > 200000 maximum":                                                                                    200000,
		"input length and `max_tokens` exceed context limit: 197000 + 8192 > 200000, decrease input length":                                     200000,
		"Input tokens exceed the configured limit of 272000 tokens. Your messages resulted in 300000 tokens.":                                   272000,
		"request (5000 tokens) exceeds the available context size (4096 tokens), try increasing it":                                             4096,
		"context length exceeded": 0,
		"":                        0,
	} {
		require.Equal(t, want, classify.ContextWindow(msg, nil), msg)
	}
	require.Equal(t, 8192, classify.ContextWindow("too long", []byte(`{"error":{"n_ctx":8192}}`)))
}

func TestIsOverflow(t *testing.T) {
	t.Parallel()
	require.True(t, classify.IsOverflow(400, "This model's maximum context length is 4096 tokens", "", ""))
	require.True(t, classify.IsOverflow(400, "", "", "context_length_exceeded"))
	require.True(t, classify.IsOverflow(400, "prompt is too long: 3 tokens > 2 maximum", "invalid_request_error", ""))
	require.True(t, classify.IsOverflow(413, "", "request_too_large", ""))
	require.False(t, classify.IsOverflow(429, "Rate limit reached on tokens per min (TPM)", "tokens", ""), "a 429 is a rate limit")
	require.False(t, classify.IsOverflow(400, "max_tokens is too large: 99999. This model supports at most 4096 completion tokens", "", ""))
	require.False(t, classify.IsOverflow(400, "Invalid schema for function 'add'", "", ""))
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	require.Equal(t, 7*time.Second, classify.RetryAfter(h("Retry-After", "7"), now))
	require.Equal(t, 1500*time.Millisecond, classify.RetryAfter(h("Retry-After", "1.5"), now))
	require.Equal(t, 250*time.Millisecond, classify.RetryAfter(h("Retry-After-Ms", "250", "Retry-After", "9"), now))
	require.Equal(t, 30*time.Second, classify.RetryAfter(h("Retry-After", now.Add(30*time.Second).Format(http.TimeFormat)), now))
	require.Equal(t, 10*time.Minute, classify.RetryAfter(h("Retry-After", "86400"), now), "capped")
	require.Zero(t, classify.RetryAfter(h("Retry-After", "soon"), now))
	require.Zero(t, classify.RetryAfter(h("Retry-After", "-3"), now))
	require.Zero(t, classify.RetryAfter(nil, now))
}

func TestHTTP(t *testing.T) {
	t.Parallel()
	for status, retry := range map[int]loop.Retryability{
		400: loop.NotRetryable, 401: loop.NotRetryable, 403: loop.NotRetryable, 404: loop.NotRetryable, 422: loop.NotRetryable,
		408: loop.Retryable, 429: loop.Retryable, 500: loop.Retryable, 502: loop.Retryable, 503: loop.Retryable, 529: loop.Retryable,
	} {
		var pe *loop.ProviderError
		require.ErrorAs(t, ep.HTTP(classify.APIError{Status: status, Body: []byte(`{"error":{"message":"x"}}`)}, nil), &pe)
		require.Equal(t, retry, pe.Retryable, status)
		require.NotEmpty(t, pe.Hint, status)
		require.Equal(t, status, pe.StatusCode)
	}
	var pe *loop.ProviderError
	require.ErrorAs(t, ep.HTTP(classify.APIError{Status: 500, Header: http.Header{"X-Should-Retry": {"false"}}}, nil), &pe)
	require.Equal(t, loop.NotRetryable, pe.Retryable, "x-should-retry overrides the status")
}

func TestTransport(t *testing.T) {
	t.Parallel()
	retryable := func(err error) loop.Retryability {
		var pe *loop.ProviderError
		require.ErrorAs(t, ep.Transport(err), &pe)
		require.ErrorIs(t, pe, err)
		return pe.Retryable
	}
	require.Equal(t, loop.Retryable, retryable(fmt.Errorf("read: %w", syscall.ECONNRESET)))
	require.Equal(t, loop.Retryable, retryable(fmt.Errorf("dial: %w", syscall.ECONNREFUSED)))
	require.Equal(t, loop.Retryable, retryable(errors.New("unexpected EOF")))
	require.Equal(t, loop.NotRetryable, retryable(&net.DNSError{Err: "no such host", Name: "nope.invalid", IsNotFound: true}))
}

// FuzzParseBody checks that any error body is read without panicking.
func FuzzParseBody(f *testing.F) {
	f.Add([]byte(`{"error":{"message":"m","type":"t","code":1}}`))
	f.Add([]byte(`{"error":"x"}`))
	f.Add([]byte(`{"message":null,"detail":[1]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		classify.ParseBody(body)
		_ = ep.HTTP(classify.APIError{Status: 400, Body: body}, nil)
	})
}

// FuzzContextWindow checks that window extraction never panics and never
// reports a negative window.
func FuzzContextWindow(f *testing.F) {
	f.Add("This model's maximum context length is 128,000 tokens.", []byte(`{"n_ctx": 4096}`))
	f.Add("prompt is too long: 99999999999999999999 tokens > 99999999999999999999 maximum", []byte(nil))
	f.Fuzz(func(t *testing.T, msg string, body []byte) {
		if n := classify.ContextWindow(msg, body); n < 0 {
			t.Fatalf("negative window %d", n)
		}
	})
}
