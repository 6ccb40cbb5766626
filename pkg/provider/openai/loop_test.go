package openai_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/provider/internal/providertest"
	"github.com/lovia-fleet/lovia/pkg/provider/openai"
)

// TestLoopConformance runs the loop's conformance scenarios through the
// adapter against its fixture server.
func TestLoopConformance(t *testing.T) {
	t.Parallel()
	providertest.RunLoop(t, providertest.Adapter{
		New: func(t *testing.T, srv *providertest.Server, native bool) loop.Provider {
			p, err := openai.New(openai.Config{
				Model: "gpt-4.1-mini", BaseURL: srv.URL + "/v1", APIKey: "sk-test", HTTPClient: srv.Client(),
				NativeJSONSchema: ptr(native), Timeout: 10 * time.Second,
			})
			require.NoError(t, err)
			return p
		},
		Text:           providertest.Fixture(t, "text.sse"),
		TextUsage:      loop.Usage{InputTokens: 19, OutputTokens: 9, TotalTokens: 28},
		AddCall:        providertest.Fixture(t, "add_call.sse"),
		Answer:         providertest.Fixture(t, "answer.sse"),
		Structured:     providertest.Fixture(t, "structured.sse"),
		CutAfter:       `" How"`,
		RateLimit:      providertest.JSONError(http.StatusTooManyRequests, rateLimitBody, "Retry-After", "7"),
		RetryAfter:     7 * time.Second,
		Overflow:       providertest.JSONError(http.StatusBadRequest, overflowBody),
		OverflowWindow: 128000,
		Unauthorized:   providertest.JSONError(http.StatusUnauthorized, authBody),
		ToolRoundTrip: func(t *testing.T, second providertest.Request) {
			msgs := providertest.Field(t, second.JSON(t), "messages").([]any)
			require.Len(t, msgs, 3)
			providertest.JSONEq(t, `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"add","arguments":"{\"a\":2,\"b\":3}"}}]}`, msgs[1])
			providertest.JSONEq(t, `{"role":"tool","tool_call_id":"c1","content":"5"}`, msgs[2])
		},
		NativeSchema: func(t *testing.T, first providertest.Request) {
			body := first.JSON(t)
			require.Equal(t, "json_schema", providertest.Field(t, body, "response_format", "type"))
			require.Equal(t, "output", providertest.Field(t, body, "response_format", "json_schema", "name"))
			require.NotNil(t, providertest.Field(t, body, "response_format", "json_schema", "schema", "properties", "result"))
			require.NotContains(t, string(first.Body), "Output format")
		},
		PromptSchema: func(t *testing.T, first providertest.Request) {
			body := first.JSON(t)
			require.NotContains(t, body, "response_format")
			require.Equal(t, "system", providertest.Field(t, body, "messages", 0, "role"))
			require.Contains(t, providertest.Field(t, body, "messages", 0, "content"), "Output format")
		},
	})
}

// reasoning_content round-trips to hosts that require it (DeepSeek,
// Moonshot): the reasoning streamed before a tool call is sent back on the
// assistant message that carries the call.
func TestReasoningReplayThroughTheLoop(t *testing.T) {
	t.Parallel()
	srv := providertest.NewServer(t, fixture(t, "reasoning_tool_call.sse"), fixture(t, "answer.sse"))
	p, err := openai.New(openai.Config{Model: "deepseek-reasoner", BaseURL: srv.URL, HTTPClient: srv.Client(), ReplayReasoning: ptr(true)})
	require.NoError(t, err)
	add := loop.NewTool("add", "Add.", func(_ context.Context, _ *loop.RunContext, in struct {
		A int `json:"a"`
		B int `json:"b"`
	}) (int, error) {
		return in.A + in.B, nil
	})
	res, err := loop.NewRunner(loop.RunnerConfig{}).Run(context.Background(), &loop.Agent{Name: "a", Provider: p, Tools: []*loop.Tool{add}}, []loop.Entry{loop.UserText("add")})
	require.NoError(t, err)
	require.Equal(t, "The answer is 5.", res.Output)
	require.Equal(t, loop.Entry{Kind: loop.KindReasoning, Text: "I should add.", Provider: "openai"}, res.Entries[1])
	msgs := providertest.Field(t, srv.Requests()[1].JSON(t), "messages").([]any)
	providertest.JSONEq(t, `{"role":"assistant","reasoning_content":"I should add.","tool_calls":[{"id":"c1","type":"function","function":{"name":"add","arguments":"{\"a\":2,\"b\":3}"}}]}`, msgs[1])
}
