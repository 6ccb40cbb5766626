package anthropic_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/provider/anthropic"
)

func transcript() *loop.ModelRequest {
	temp := 0.2
	parallel := false
	return &loop.ModelRequest{
		Entries: []loop.Entry{
			loop.SystemText("be brief"),
			loop.UserText("What's 2+3 and the time?"),
			{Kind: loop.KindReasoning, Text: "think", Signature: "sig1", Provider: "anthropic"},
			{Kind: loop.KindReasoning, Text: "foreign", Provider: "openai"},
			{Kind: loop.KindReasoning, Redacted: "opaque", Provider: "anthropic"},
			loop.AssistantText("Let me check."),
			loop.ToolCallEntry("c1", "add", `{"a":2,"b":3}`),
			loop.ToolCallEntry("c2", "clock", ""),
			loop.ToolResultEntry("c2", "clock", "12:00", false),
			loop.ToolResultEntry("c1", "add", "Tool error: boom", true),
			loop.AssistantText("It is 5 at 12:00."),
			loop.SystemText("answer in English"),
			{Kind: loop.KindInput, Role: loop.RoleUser, Parts: []loop.Part{
				{Type: loop.PartText, Text: "And this?"},
				{Type: loop.PartImage, Data: "aGVsbG8=", MimeType: "image/png"},
				{Type: loop.PartFile, Data: "JVBERi0=", MimeType: "application/pdf", Filename: "a.pdf"},
			}},
		},
		Tools: []loop.ToolSchema{
			{Name: "add", Description: "Add two integers.", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}`), Strict: true},
			{Name: "clock", Description: "The time."},
		},
		ResponseFormat: &loop.ResponseFormat{Name: "answer", Schema: json.RawMessage(`{"type":"object","properties":{"result":{"type":"integer"}},"required":["result"],"additionalProperties":false}`), Strict: true},
		Settings: loop.ModelSettings{
			Temperature: &temp, Stop: []string{"END"}, ParallelToolCalls: &parallel,
			ProviderOptions: map[string]map[string]any{"anthropic": {"metadata": map[string]any{"user_id": "u1"}}, "openai": {"seed": 1}},
		},
	}
}

const wantMessages = `[
	{"role":"user","content":[{"type":"text","text":"What's 2+3 and the time?"}]},
	{"role":"assistant","content":[
		{"type":"thinking","thinking":"think","signature":"sig1"},
		{"type":"redacted_thinking","data":"opaque"},
		{"type":"text","text":"Let me check."},
		{"type":"tool_use","id":"c1","name":"add","input":{"a":2,"b":3}},
		{"type":"tool_use","id":"c2","name":"clock","input":{}}]},
	{"role":"user","content":[
		{"type":"tool_result","tool_use_id":"c2","content":[{"type":"text","text":"12:00"}]},
		{"type":"tool_result","tool_use_id":"c1","is_error":true,"content":[{"type":"text","text":"Tool error: boom"}]}]},
	{"role":"assistant","content":[{"type":"text","text":"It is 5 at 12:00."}]},
	{"role":"user","content":[
		{"type":"text","text":"And this?"},
		{"type":"image","source":{"type":"base64","media_type":"image/png","data":"aGVsbG8="}},
		{"type":"document","title":"a.pdf","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}}]}
]`

func TestRequestBody(t *testing.T) {
	t.Parallel()

	t.Run("full_transcript", func(t *testing.T) {
		t.Parallel()
		p, srv := setup(t, func(c *anthropic.Config) { c.NativeJSONSchema = ptr(true) }, fixture(t, "structured.sse"))
		_, err := streamOnce(t, p, transcript())
		require.NoError(t, err)
		body := srv.Requests()[0].JSON(t)
		require.Equal(t, "claude-sonnet-4-5", body["model"])
		require.Equal(t, true, body["stream"])
		require.EqualValues(t, anthropic.DefaultMaxTokens, body["max_tokens"], "the required max_tokens has a default")
		requireJSON(t, `[{"type":"text","text":"be brief"},{"type":"text","text":"answer in English"}]`, body["system"])
		requireJSON(t, wantMessages, body["messages"])
		requireJSON(t, `[
			{"name":"add","description":"Add two integers.","strict":true,"input_schema":{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}},
			{"name":"clock","description":"The time.","input_schema":{"type":"object","properties":{}}}]`, body["tools"])
		requireJSON(t, `{"type":"auto","disable_parallel_tool_use":true}`, body["tool_choice"])
		requireJSON(t, `{"format":{"type":"json_schema","schema":{"type":"object","properties":{"result":{"type":"integer"}},"required":["result"],"additionalProperties":false}}}`, body["output_config"])
		require.EqualValues(t, 0.2, body["temperature"])
		require.Equal(t, []any{"END"}, body["stop_sequences"])
		requireJSON(t, `{"user_id":"u1"}`, body["metadata"])
		require.NotContains(t, body, "seed")
		require.NotContains(t, body, "thinking")
	})

	t.Run("compatible_host_defaults_to_the_prompt_path", func(t *testing.T) {
		t.Parallel()
		p, srv := setup(t, nil, fixture(t, "text.sse"))
		require.False(t, p.Info().NativeJSONSchema)
		req := transcript()
		req.Settings.MaxTokens = 512
		_, err := streamOnce(t, p, req)
		require.NoError(t, err)
		body := srv.Requests()[0].JSON(t)
		require.NotContains(t, body, "output_config")
		require.EqualValues(t, 512, body["max_tokens"])
		require.NotContains(t, body["tools"].([]any)[0], "strict")
	})

	t.Run("prompt_caching_breakpoints", func(t *testing.T) {
		t.Parallel()
		p, srv := setup(t, func(c *anthropic.Config) { c.PromptCaching = true; c.CacheTTL = "1h" }, fixture(t, "text.sse"))
		_, err := streamOnce(t, p, transcript())
		require.NoError(t, err)
		body := srv.Requests()[0].JSON(t)
		cc := `{"type":"ephemeral","ttl":"1h"}`
		tools := body["tools"].([]any)
		requireJSON(t, cc, tools[1].(map[string]any)["cache_control"])
		require.NotContains(t, tools[0], "cache_control")
		system := body["system"].([]any)
		requireJSON(t, cc, system[1].(map[string]any)["cache_control"])
		msgs := body["messages"].([]any)
		last := msgs[len(msgs)-1].(map[string]any)["content"].([]any)
		requireJSON(t, cc, last[len(last)-1].(map[string]any)["cache_control"])
		require.NotContains(t, last[0], "cache_control")
	})

	t.Run("no_caching_by_default", func(t *testing.T) {
		t.Parallel()
		p, srv := setup(t, nil, fixture(t, "text.sse"))
		_, err := streamOnce(t, p, transcript())
		require.NoError(t, err)
		require.NotContains(t, string(srv.Requests()[0].Body), "cache_control")
	})

	t.Run("thinking_budget", func(t *testing.T) {
		t.Parallel()
		p, srv := setup(t, func(c *anthropic.Config) { c.ThinkingBudget = 2048 }, fixture(t, "thinking.sse"))
		req := transcript()
		req.Settings.MaxTokens = 1000
		_, err := streamOnce(t, p, req)
		require.NoError(t, err)
		body := srv.Requests()[0].JSON(t)
		requireJSON(t, `{"type":"enabled","budget_tokens":2048}`, body["thinking"])
		require.EqualValues(t, 2048+anthropic.MinThinkingBudget, body["max_tokens"], "max_tokens exceeds the budget")
		require.NotContains(t, body, "temperature", "thinking requires the default temperature")
	})

	t.Run("tool_call_arguments_that_are_not_an_object", func(t *testing.T) {
		t.Parallel()
		p, srv := setup(t, nil, fixture(t, "text.sse"))
		req := &loop.ModelRequest{Entries: []loop.Entry{
			loop.UserText("go"),
			loop.ToolCallEntry("c9", "echo", `{not json`),
			loop.ToolResultEntry("c9", "echo", "Tool error: invalid arguments", true),
		}}
		_, err := streamOnce(t, p, req)
		require.NoError(t, err)
		msgs := srv.Requests()[0].JSON(t)["messages"].([]any)
		requireJSON(t, `{"role":"assistant","content":[{"type":"tool_use","id":"c9","name":"echo","input":{"_raw":"{not json"}}]}`, msgs[1])
	})
}

func TestConfig(t *testing.T) {
	t.Parallel()

	t.Run("defaults", func(t *testing.T) {
		c := anthropic.Config{Model: "claude-sonnet-4-5"}.WithDefaults()
		require.Equal(t, anthropic.DefaultBaseURL, c.BaseURL)
		require.Equal(t, anthropic.DefaultMaxTokens, c.MaxTokens)
		require.True(t, *c.NativeJSONSchema)
		require.Equal(t, anthropic.DefaultTimeout, c.Timeout)
		require.False(t, *anthropic.Config{Model: "claude-3-5-haiku-latest"}.WithDefaults().NativeJSONSchema)
		require.False(t, *anthropic.Config{Model: "claude-sonnet-4-20250514"}.WithDefaults().NativeJSONSchema)
		require.False(t, *anthropic.Config{Model: "claude-sonnet-4-5", BaseURL: "https://api.deepseek.com/anthropic"}.WithDefaults().NativeJSONSchema)
		require.Equal(t, "https://gw.example.com", anthropic.Config{Model: "m", BaseURL: "https://gw.example.com/v1/"}.WithDefaults().BaseURL)
	})

	t.Run("validation_names_the_field", func(t *testing.T) {
		for cfg, field := range map[*anthropic.Config]string{
			{}: "Config.Model",
			{Model: "m", BaseURL: "api.anthropic.com"}:                 "Config.BaseURL",
			{Model: "m", MaxTokens: -1}:                                "Config.MaxTokens",
			{Model: "m", ThinkingBudget: 100}:                          "Config.ThinkingBudget",
			{Model: "m", ThinkingBudget: 2048, AdaptiveThinking: true}: "Config.AdaptiveThinking",
			{Model: "m", CacheTTL: "2h"}:                               "Config.CacheTTL",
		} {
			_, err := anthropic.New(*cfg)
			require.ErrorContains(t, err, field)
			require.ErrorIs(t, err, loop.ErrUser)
		}
	})
}
