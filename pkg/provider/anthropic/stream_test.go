package anthropic_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/provider/anthropic"
	"github.com/lovia-fleet/lovia/pkg/provider/internal/providertest"
)

func TestStream(t *testing.T) {
	t.Parallel()

	t.Run("plain_text", func(t *testing.T) {
		t.Parallel()
		p, srv := setup(t, nil, fixture(t, "text.sse"))
		rec, err := streamOnce(t, p, nil)
		require.NoError(t, err)
		require.Equal(t, "Hello! How can I help?", rec.Text())
		require.Equal(t, 4, rec.Count(loop.DeltaText))
		require.Equal(t, loop.Usage{InputTokens: 25, OutputTokens: 15, TotalTokens: 40}, rec.Usage())
		require.Equal(t, "stop", rec.Finish())
		reqs := srv.Requests()
		require.Len(t, reqs, 1)
		require.Equal(t, "/v1/messages", reqs[0].Path)
		require.Equal(t, "sk-ant-test", reqs[0].Header.Get("X-Api-Key"))
		require.NotEmpty(t, reqs[0].Header.Get("Anthropic-Version"))
	})

	t.Run("tool_use_in_many_fragments", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil, fixture(t, "tool_use.sse"))
		rec, err := streamOnce(t, p, nil)
		require.NoError(t, err)
		require.Equal(t, "Okay, let me check the weather.", rec.Text())
		require.Equal(t, []loop.Entry{loop.ToolCallEntry("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather", `{"location": "San Francisco, CA", "unit": "fahrenheit"}`)}, rec.Calls())
		require.Equal(t, "tool_calls", rec.Finish())
		require.Equal(t, loop.Usage{InputTokens: 472, OutputTokens: 89, TotalTokens: 561}, rec.Usage())
	})

	t.Run("two_parallel_tool_uses", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil, fixture(t, "parallel_tool_use.sse"))
		rec, err := streamOnce(t, p, nil)
		require.NoError(t, err)
		require.Equal(t, []loop.Entry{
			loop.ToolCallEntry("toolu_A", "add", `{"a": 2, "b": 3}`),
			loop.ToolCallEntry("toolu_B", "clock", `{}`),
		}, rec.Calls())
	})

	t.Run("thinking_with_signature_and_redacted_then_text", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil, fixture(t, "thinking.sse"))
		rec, err := streamOnce(t, p, nil)
		require.NoError(t, err)
		require.Equal(t, "Let me solve this step by step.", rec.Reasoning())
		require.Equal(t, "The answer is 42.", rec.Text())
		require.Equal(t, []loop.Entry{
			{Kind: loop.KindReasoning, Text: "Let me solve this step by step.", Signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds", Provider: "anthropic"},
			{Kind: loop.KindReasoning, Redacted: "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP", Provider: "anthropic"},
		}, rec.Entries())
		require.Equal(t, loop.DeltaReasoning, rec.Kinds()[0], "thinking streams first")
	})

	t.Run("usage_with_cache_reads_and_writes", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil, fixture(t, "cached_usage.sse"))
		rec, err := streamOnce(t, p, nil)
		require.NoError(t, err)
		require.Equal(t, loop.Usage{
			InputTokens: 21 + 188086 + 1024, OutputTokens: 393,
			CacheReadTokens: 1024, CacheWriteTokens: 188086,
			TotalTokens: 21 + 188086 + 1024 + 393,
		}, rec.Usage(), "input tokens include cache reads and writes")
	})

	t.Run("tool_input_given_whole_at_block_start", func(t *testing.T) {
		t.Parallel()
		sse := `event: message_start
data: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"x","content":[],"stop_reason":null,"usage":{"input_tokens":3,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"add","input":{"a":1,"b":2}}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":5}}

event: message_stop
data: {"type":"message_stop"}

`
		p, _ := setup(t, nil, providertest.SSE(sse))
		rec, err := streamOnce(t, p, nil)
		require.NoError(t, err)
		require.Equal(t, []loop.Entry{loop.ToolCallEntry("t1", "add", `{"a":1,"b":2}`)}, rec.Calls())
	})

	t.Run("stop_reasons", func(t *testing.T) {
		t.Parallel()
		for reason, want := range map[string]string{"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls", "refusal": "content_filter", "pause_turn": "pause_turn"} {
			sse := `event: message_start
data: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"x","content":[],"stop_reason":null,"usage":{"input_tokens":3,"output_tokens":1}}}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"` + reason + `"},"usage":{"output_tokens":5}}

event: message_stop
data: {"type":"message_stop"}

`
			p, _ := setup(t, nil, providertest.SSE(sse))
			rec, err := streamOnce(t, p, nil)
			require.NoError(t, err)
			require.Equal(t, want, rec.Finish(), reason)
		}
	})

	t.Run("emit_error_stops_the_stream", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil, fixture(t, "text.sse"))
		stop := errors.New("consumer gone")
		err := p.Stream(context.Background(), &loop.ModelRequest{Entries: []loop.Entry{loop.UserText("hi")}}, func(d loop.Delta) error {
			if d.Kind == loop.DeltaText {
				return stop
			}
			return nil
		})
		require.ErrorIs(t, err, stop)
	})

	t.Run("overloaded_error_event_mid_stream", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t, nil, fixture(t, "overloaded_midstream.sse"))
		rec, err := streamOnce(t, p, nil)
		pe := providerError(t, err)
		require.Equal(t, loop.Retryable, pe.Retryable)
		require.ErrorIs(t, err, anthropic.ErrStreamError)
		require.Contains(t, pe.Message, "overloaded_error")
		require.Equal(t, "par", rec.Text())
	})

	t.Run("invalid_request_error_event_is_not_retried", func(t *testing.T) {
		t.Parallel()
		sse := `event: message_start
data: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"x","content":[],"stop_reason":null,"usage":{"input_tokens":3,"output_tokens":1}}}

event: error
data: {"type":"error","error":{"type":"invalid_request_error","message":"tool_use ids must be unique"}}

`
		p, _ := setup(t, nil, providertest.SSE(sse))
		_, err := streamOnce(t, p, nil)
		require.Equal(t, loop.NotRetryable, providerError(t, err).Retryable)
	})
}

// A consumer that stops mid-stream gets its error back at once, even when
// the server keeps the stream open.
func TestEmitErrorOnAnOpenStream(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}\n\n"))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	p, err := anthropic.New(anthropic.Config{Model: "m", BaseURL: srv.URL, HTTPClient: srv.Client(), IdleTimeout: time.Hour})
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
