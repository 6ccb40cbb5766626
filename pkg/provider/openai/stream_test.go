package openai_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/provider/internal/providertest"
	"github.com/lovia-fleet/lovia/pkg/provider/openai"
)

func TestStream(t *testing.T) {
	t.Parallel()

	t.Run("plain_text", func(t *testing.T) {
		t.Parallel()
		p, srv := setup(t, nil, fixture(t, "text.sse"))
		rec, err := streamOnce(t, p, nil)
		require.NoError(t, err)
		require.Equal(t, "Hello! How can I help?", rec.Text())
		require.Equal(t, 7, rec.Count(loop.DeltaText), "one delta per chunk")
		require.Equal(t, loop.Usage{InputTokens: 19, OutputTokens: 9, TotalTokens: 28}, rec.Usage())
		require.Equal(t, "stop", rec.Finish())
		kinds := rec.Kinds()
		require.Equal(t, []loop.DeltaKind{loop.DeltaUsage, loop.DeltaFinish}, kinds[len(kinds)-2:], "usage and finish come last")
		reqs := srv.Requests()
		require.Len(t, reqs, 1)
		require.Equal(t, "POST", reqs[0].Method)
		require.Equal(t, "/v1/chat/completions", reqs[0].Path)
	})

	t.Run("one_tool_call_in_many_fragments", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil, fixture(t, "tool_call.sse"))
		rec, err := streamOnce(t, p, nil)
		require.NoError(t, err)
		require.Equal(t, 12, rec.Count(loop.DeltaToolCall))
		require.Equal(t, []loop.Entry{loop.ToolCallEntry("call_Zq1", "get_weather", `{"city":"Paris","unit":"celsius"}`)}, rec.Calls())
		require.Equal(t, "tool_calls", rec.Finish())
		require.Empty(t, rec.Text())
	})

	t.Run("two_parallel_calls", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil, fixture(t, "parallel_calls.sse"))
		rec, err := streamOnce(t, p, nil)
		require.NoError(t, err)
		require.Equal(t, []loop.Entry{
			loop.ToolCallEntry("call_A", "add", `{"a": 2, "b": 3}`),
			loop.ToolCallEntry("call_B", "clock", `{}`),
		}, rec.Calls())
		require.Equal(t, "tool_calls", rec.Finish())
	})

	t.Run("reasoning_then_text", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil, fixture(t, "reasoning.sse"))
		rec, err := streamOnce(t, p, nil)
		require.NoError(t, err)
		require.Equal(t, "The user greets me.", rec.Reasoning())
		require.Equal(t, "Hi there.", rec.Text())
		kinds := rec.Kinds()
		require.Equal(t, loop.DeltaReasoning, kinds[0], "reasoning streams first")
		require.Equal(t, []loop.Entry{{Kind: loop.KindReasoning, Text: "The user greets me.", Provider: "openai"}}, rec.Entries(),
			"the reasoning entry carries the adapter name so only this adapter replays it")
		require.Equal(t, loop.Usage{InputTokens: 10, OutputTokens: 12, TotalTokens: 22}, rec.Usage())
	})

	t.Run("usage_with_cached_tokens", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil, fixture(t, "cached_usage.sse"))
		rec, err := streamOnce(t, p, nil)
		require.NoError(t, err)
		require.Equal(t, loop.Usage{InputTokens: 2006, OutputTokens: 300, CacheReadTokens: 1920, TotalTokens: 2306}, rec.Usage())
	})

	t.Run("deepseek_cache_hit_tokens", func(t *testing.T) {
		t.Parallel()
		sse := `data: {"id":"1","object":"chat.completion.chunk","created":1,"model":"deepseek-chat","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":1,"total_tokens":101,"prompt_cache_hit_tokens":64,"prompt_cache_miss_tokens":36}}

data: [DONE]

`
		p, _ := setup(t, nil, providertest.SSE(sse))
		rec, err := streamOnce(t, p, nil)
		require.NoError(t, err)
		require.Equal(t, loop.Usage{InputTokens: 100, OutputTokens: 1, CacheReadTokens: 64, TotalTokens: 101}, rec.Usage())
	})

	t.Run("tool_calls_without_index", func(t *testing.T) {
		t.Parallel()
		// Some compatible servers omit "index": a new id opens a new slot.
		sse := `data: {"id":"1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"id":"a","type":"function","function":{"name":"add","arguments":"{\"a\":1"}}]},"finish_reason":null}]}

data: {"id":"1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":",\"b\":2}"}}]},"finish_reason":null}]}

data: {"id":"1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"id":"b","type":"function","function":{"name":"clock","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}

data: [DONE]

`
		p, _ := setup(t, nil, providertest.SSE(sse))
		rec, err := streamOnce(t, p, nil)
		require.NoError(t, err)
		require.Equal(t, []loop.Entry{loop.ToolCallEntry("a", "add", `{"a":1,"b":2}`), loop.ToolCallEntry("b", "clock", "{}")}, rec.Calls())
	})

	t.Run("finish_reason_without_done", func(t *testing.T) {
		t.Parallel()
		// A server that closes after the finish reason without "[DONE]".
		sse := `data: {"id":"1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"done"},"finish_reason":"length"}]}

`
		p, _ := setup(t, nil, providertest.SSE(sse))
		rec, err := streamOnce(t, p, nil)
		require.NoError(t, err)
		require.Equal(t, "done", rec.Text())
		require.Equal(t, "length", rec.Finish())
	})

	t.Run("non_streaming_answer", func(t *testing.T) {
		t.Parallel()
		// A server that ignores "stream": true and answers with one completion.
		body := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"whole","reasoning_content":"thought","tool_calls":[{"id":"x","type":"function","function":{"name":"add","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`
		p, _ := setup(t, nil, providertest.Response{Body: body})
		rec, err := streamOnce(t, p, nil)
		require.NoError(t, err)
		require.Equal(t, "whole", rec.Text())
		require.Equal(t, "thought", rec.Reasoning())
		require.Equal(t, []loop.Entry{loop.ToolCallEntry("x", "add", "{}")}, rec.Calls())
		require.Equal(t, "tool_calls", rec.Finish())
		require.Equal(t, int64(5), rec.Usage().TotalTokens)
	})

	t.Run("emit_error_stops_the_stream", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil, fixture(t, "text.sse"))
		stop := errors.New("consumer gone")
		n := 0
		err := p.Stream(context.Background(), &loop.ModelRequest{Entries: []loop.Entry{loop.UserText("hi")}}, func(loop.Delta) error {
			n++
			if n == 2 {
				return stop
			}
			return nil
		})
		require.ErrorIs(t, err, stop)
		require.Equal(t, 2, n)
	})

	t.Run("error_object_mid_stream", func(t *testing.T) {
		t.Parallel()
		sse := `data: {"id":"1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"par"},"finish_reason":null}]}

data: {"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}

`
		p, _ := setup(t, nil, providertest.SSE(sse))
		rec, err := streamOnce(t, p, nil)
		pe := providerError(t, err)
		require.True(t, pe.IsRetryable())
		require.ErrorIs(t, err, openai.ErrStreamError)
		require.Contains(t, pe.Message, "The server had an error")
		require.Equal(t, "par", rec.Text())
	})

	t.Run("html_at_the_base_url_is_not_retried", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil, providertest.Response{Body: "<!doctype html><title>Open WebUI</title>", Header: map[string]string{"Content-Type": "text/html; charset=utf-8"}})
		_, err := streamOnce(t, p, nil)
		pe := providerError(t, err)
		require.Equal(t, loop.NotRetryable, pe.Retryable)
		require.Contains(t, pe.Message, "text/html")
		require.Contains(t, pe.Hint, "OPENAI_BASE_URL")
	})

	t.Run("cancelled_context", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil, fixture(t, "text.sse"))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := p.Stream(ctx, &loop.ModelRequest{Entries: []loop.Entry{loop.UserText("hi")}}, func(loop.Delta) error { return nil })
		require.ErrorIs(t, err, context.Canceled)
		var pe *loop.ProviderError
		require.False(t, errors.As(err, &pe), "cancellation is not a provider failure")
	})
}

// A consumer that stops mid-stream gets its error back at once, even when
// the server keeps the stream open.
func TestEmitErrorOnAnOpenStream(t *testing.T) {
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
	p, err := openai.New(openai.Config{Model: "m", BaseURL: srv.URL, HTTPClient: srv.Client(), IdleTimeout: time.Hour})
	require.NoError(t, err)
	stop := errors.New("consumer gone")
	done := make(chan error, 1)
	go func() {
		done <- p.Stream(context.Background(), &loop.ModelRequest{Entries: []loop.Entry{loop.UserText("hi")}}, func(loop.Delta) error { return stop })
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, stop)
	case <-time.After(10 * time.Second):
		t.Fatal("Stream did not return after emit failed")
	}
}
