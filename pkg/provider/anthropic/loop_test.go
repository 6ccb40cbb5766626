package anthropic_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/provider/anthropic"
	"github.com/lovia-fleet/lovia/pkg/provider/internal/providertest"
)

// TestLoopConformance runs the loop's conformance scenarios through the
// adapter against its fixture server.
func TestLoopConformance(t *testing.T) {
	t.Parallel()
	providertest.RunLoop(t, providertest.Adapter{
		New: func(t *testing.T, srv *providertest.Server, native bool) loop.Provider {
			p, err := anthropic.New(anthropic.Config{
				Model: "claude-sonnet-4-5", BaseURL: srv.URL, APIKey: "sk-ant-test", HTTPClient: srv.Client(),
				NativeJSONSchema: ptr(native), Timeout: 10 * time.Second,
			})
			require.NoError(t, err)
			return p
		},
		Text:           providertest.Fixture(t, "text.sse"),
		TextUsage:      loop.Usage{InputTokens: 25, OutputTokens: 15, TotalTokens: 40},
		AddCall:        providertest.Fixture(t, "add_call.sse"),
		Answer:         providertest.Fixture(t, "answer.sse"),
		Structured:     providertest.Fixture(t, "structured.sse"),
		CutAfter:       `" How can"`,
		RateLimit:      providertest.JSONError(http.StatusTooManyRequests, rateLimitBody, "Retry-After", "12"),
		RetryAfter:     12 * time.Second,
		Overflow:       providertest.JSONError(http.StatusBadRequest, overflowBody),
		OverflowWindow: 200000,
		Unauthorized:   providertest.JSONError(http.StatusUnauthorized, authBody),
		ToolRoundTrip: func(t *testing.T, second providertest.Request) {
			msgs := providertest.Field(t, second.JSON(t), "messages").([]any)
			require.Len(t, msgs, 3)
			providertest.JSONEq(t, `{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"add","input":{"a":2,"b":3}}]}`, msgs[1])
			providertest.JSONEq(t, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":[{"type":"text","text":"5"}]}]}`, msgs[2])
		},
		NativeSchema: func(t *testing.T, first providertest.Request) {
			body := first.JSON(t)
			require.Equal(t, "json_schema", providertest.Field(t, body, "output_config", "format", "type"))
			require.NotNil(t, providertest.Field(t, body, "output_config", "format", "schema", "properties", "result"))
			require.NotContains(t, string(first.Body), "Output format")
		},
		PromptSchema: func(t *testing.T, first providertest.Request) {
			body := first.JSON(t)
			require.NotContains(t, body, "output_config")
			require.Contains(t, providertest.Field(t, body, "system", 0, "text"), "Output format", "the schema is in the system prompt")
		},
	})
}

// Thinking blocks round-trip: the signed and the redacted block the model
// streamed before its tool call are sent back, unchanged and in place, with
// the tool call on the next request.
func TestThinkingRoundTripThroughTheLoop(t *testing.T) {
	t.Parallel()
	srv := providertest.NewServer(t, fixture(t, "thinking_tool_use.sse"), fixture(t, "answer.sse"))
	p, err := anthropic.New(anthropic.Config{Model: "claude-sonnet-4-5", BaseURL: srv.URL, APIKey: "k", HTTPClient: srv.Client(), ThinkingBudget: 2048})
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
	require.Equal(t, loop.Entry{Kind: loop.KindReasoning, Text: "I should add.", Signature: "SIG-abc", Provider: "anthropic"}, res.Entries[1])
	require.Equal(t, loop.Entry{Kind: loop.KindReasoning, Redacted: "REDACTED-xyz", Provider: "anthropic"}, res.Entries[2])
	msgs := providertest.Field(t, srv.Requests()[1].JSON(t), "messages").([]any)
	providertest.JSONEq(t, `{"role":"assistant","content":[
		{"type":"thinking","thinking":"I should add.","signature":"SIG-abc"},
		{"type":"redacted_thinking","data":"REDACTED-xyz"},
		{"type":"tool_use","id":"c1","name":"add","input":{"a":2,"b":3}}]}`, msgs[1])
}
