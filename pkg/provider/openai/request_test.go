package openai_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/provider/openai"
)

// transcript exercises every entry kind: a system prompt, a tool round trip
// with two calls whose results arrive out of order, reasoning of this
// adapter and of another, and a multimodal user input.
func transcript() *loop.ModelRequest {
	temp := 0.2
	parallel := false
	return &loop.ModelRequest{
		Entries: []loop.Entry{
			loop.SystemText("be brief"),
			loop.UserText("What's 2+3 and the time?"),
			{Kind: loop.KindReasoning, Text: "think", Provider: "openai"},
			loop.AssistantText("Let me check."),
			loop.ToolCallEntry("c1", "add", `{"a":2,"b":3}`),
			loop.ToolCallEntry("c2", "clock", ""),
			loop.ToolResultEntry("c2", "clock", "12:00", false),
			loop.ToolResultEntry("c1", "add", "5", false),
			{Kind: loop.KindReasoning, Text: "foreign", Provider: "anthropic", Signature: "sig"},
			loop.AssistantText("It is 5 at 12:00."),
			{Kind: loop.KindInput, Role: loop.RoleUser, Parts: []loop.Part{
				{Type: loop.PartText, Text: "And this?"},
				{Type: loop.PartImage, URL: "https://example.com/cat.png"},
			}},
		},
		Tools: []loop.ToolSchema{
			{Name: "add", Description: "Add two integers.", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}`), Strict: true},
			{Name: "clock", Description: "The time."},
		},
		ResponseFormat: &loop.ResponseFormat{Name: "answer", Schema: json.RawMessage(`{"type":"object","properties":{"result":{"type":"integer"}},"required":["result"]}`), Strict: true},
		Settings: loop.ModelSettings{
			Temperature: &temp, MaxTokens: 256, Stop: []string{"END"}, ParallelToolCalls: &parallel,
			ProviderOptions: map[string]map[string]any{"openai": {"seed": 7, "user": nil}, "anthropic": {"ignored": true}},
		},
	}
}

const wantMessages = `[
	{"role":"system","content":"be brief"},
	{"role":"user","content":"What's 2+3 and the time?"},
	{"role":"assistant","content":"Let me check.","reasoning_content":"think","tool_calls":[
		{"id":"c1","type":"function","function":{"name":"add","arguments":"{\"a\":2,\"b\":3}"}},
		{"id":"c2","type":"function","function":{"name":"clock","arguments":"{}"}}]},
	{"role":"tool","tool_call_id":"c2","content":"12:00"},
	{"role":"tool","tool_call_id":"c1","content":"5"},
	{"role":"assistant","content":"It is 5 at 12:00."},
	{"role":"user","content":[{"type":"text","text":"And this?"},{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}]}
]`

const wantTools = `[
	{"type":"function","function":{"name":"add","description":"Add two integers.","strict":true,
		"parameters":{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}}},
	{"type":"function","function":{"name":"clock","description":"The time.","parameters":{"type":"object","properties":{}}}}
]`

func TestRequestBody(t *testing.T) {
	t.Parallel()

	t.Run("official_dialect", func(t *testing.T) {
		t.Parallel()
		p, srv := setup(t, func(c *openai.Config) {
			c.NativeJSONSchema = ptr(true)
			c.MaxTokensField = openai.MaxCompletionTokens
			c.ReplayReasoning = ptr(true)
		}, fixture(t, "structured.sse"))
		_, err := streamOnce(t, p, transcript())
		require.NoError(t, err)
		body := srv.Requests()[0].JSON(t)
		require.Equal(t, "gpt-4.1-mini", body["model"])
		require.Equal(t, true, body["stream"])
		require.Equal(t, map[string]any{"include_usage": true}, body["stream_options"])
		requireJSON(t, wantMessages, body["messages"])
		requireJSON(t, wantTools, body["tools"])
		requireJSON(t, `{"type":"json_schema","json_schema":{"name":"answer","strict":true,"schema":{"type":"object","properties":{"result":{"type":"integer"}},"required":["result"]}}}`, body["response_format"])
		require.EqualValues(t, 256, body["max_completion_tokens"])
		require.NotContains(t, body, "max_tokens")
		require.EqualValues(t, 0.2, body["temperature"])
		require.Equal(t, []any{"END"}, body["stop"])
		require.Equal(t, false, body["parallel_tool_calls"])
		require.EqualValues(t, 7, body["seed"], "provider options are set verbatim")
		require.NotContains(t, body, "ignored", "other adapters' options are not sent")
	})

	t.Run("compatible_defaults", func(t *testing.T) {
		t.Parallel()
		p, srv := setup(t, nil, fixture(t, "text.sse"))
		info := p.Info()
		require.False(t, info.NativeJSONSchema, "prompt path off the official host")
		_, err := streamOnce(t, p, transcript())
		require.NoError(t, err)
		body := srv.Requests()[0].JSON(t)
		require.NotContains(t, body, "response_format")
		require.EqualValues(t, 256, body["max_tokens"])
		require.NotContains(t, body, "max_completion_tokens")
		msgs := body["messages"].([]any)
		require.NotContains(t, msgs[2], "reasoning_content", "reasoning is not replayed to hosts that do not want it")
	})

	t.Run("provider_option_nil_strips_a_default", func(t *testing.T) {
		t.Parallel()
		p, srv := setup(t, nil, fixture(t, "text.sse"))
		req := &loop.ModelRequest{Entries: []loop.Entry{loop.UserText("hi")}, Settings: loop.ModelSettings{
			ProviderOptions: map[string]map[string]any{"openai": {"stream_options": nil, "reasoning_effort": "low"}},
		}}
		_, err := streamOnce(t, p, req)
		require.NoError(t, err)
		body := srv.Requests()[0].JSON(t)
		require.NotContains(t, body, "stream_options")
		require.Equal(t, "low", body["reasoning_effort"])
	})

	t.Run("keyless_endpoint_sends_no_authorization", func(t *testing.T) {
		t.Parallel()
		p, srv := setup(t, func(c *openai.Config) { c.APIKey = "" }, fixture(t, "text.sse"))
		_, err := streamOnce(t, p, nil)
		require.NoError(t, err)
		require.Empty(t, srv.Requests()[0].Header.Get("Authorization"))
	})

	t.Run("headers_are_sent", func(t *testing.T) {
		t.Parallel()
		p, srv := setup(t, func(c *openai.Config) { c.Headers = map[string]string{"X-Gateway-Route": "blue"} }, fixture(t, "text.sse"))
		_, err := streamOnce(t, p, nil)
		require.NoError(t, err)
		require.Equal(t, "blue", srv.Requests()[0].Header.Get("X-Gateway-Route"))
	})

	t.Run("inline_image_and_file_parts", func(t *testing.T) {
		t.Parallel()
		p, srv := setup(t, func(c *openai.Config) { c.Vision = ptr(false) }, fixture(t, "text.sse"))
		req := &loop.ModelRequest{Entries: []loop.Entry{{Kind: loop.KindInput, Role: loop.RoleUser, Parts: []loop.Part{
			{Type: loop.PartImage, Data: "aGVsbG8=", MimeType: "image/png"},
			{Type: loop.PartFile, Data: "JVBERi0=", MimeType: "application/pdf", Filename: "a.pdf"},
		}}}}
		_, err := streamOnce(t, p, req)
		require.NoError(t, err)
		body := srv.Requests()[0].JSON(t)
		requireJSON(t, `[{"role":"user","content":[{"type":"text","text":"[image: image/png, 5 B]"},{"type":"text","text":"[file a.pdf: application/pdf, 5 B]"}]}]`, body["messages"])
	})

	t.Run("bad_tool_schema_is_not_retried", func(t *testing.T) {
		t.Parallel()
		p, srv := setup(t, nil)
		_, err := streamOnce(t, p, &loop.ModelRequest{Tools: []loop.ToolSchema{{Name: "x", Parameters: json.RawMessage(`[1`)}}})
		pe := providerError(t, err)
		require.Equal(t, loop.NotRetryable, pe.Retryable)
		require.Empty(t, srv.Requests())
	})
}

func TestConfig(t *testing.T) {
	t.Parallel()

	t.Run("defaults_on_the_official_host", func(t *testing.T) {
		c := openai.Config{Model: "gpt-4.1"}.WithDefaults()
		require.Equal(t, openai.DefaultBaseURL, c.BaseURL)
		require.True(t, *c.NativeJSONSchema)
		require.Equal(t, openai.MaxCompletionTokens, c.MaxTokensField)
		require.False(t, *c.ReplayReasoning)
		require.True(t, *c.StreamUsage)
		require.Equal(t, openai.DefaultTimeout, c.Timeout)
		require.Equal(t, openai.DefaultIdleTimeout, c.IdleTimeout)
		require.NotNil(t, c.HTTPClient)
	})

	t.Run("defaults_elsewhere", func(t *testing.T) {
		c := openai.Config{Model: "llama3", BaseURL: "http://localhost:11434/v1/"}.WithDefaults()
		require.Equal(t, "http://localhost:11434/v1", c.BaseURL)
		require.False(t, *c.NativeJSONSchema)
		require.Equal(t, openai.MaxTokens, c.MaxTokensField)
		require.False(t, *c.ReplayReasoning)
		d := openai.Config{Model: "deepseek-reasoner", BaseURL: "https://api.deepseek.com"}.WithDefaults()
		require.True(t, *d.ReplayReasoning)
	})

	t.Run("validation_names_the_field", func(t *testing.T) {
		for cfg, field := range map[*openai.Config]string{
			{}:                                      "Config.Model",
			{Model: "m", BaseURL: "localhost:8000"}: "Config.BaseURL",
			{Model: "m", MaxTokensField: "max"}:     "Config.MaxTokensField",
			{Model: "m", ContextWindow: -1}:         "Config.ContextWindow",
		} {
			_, err := openai.New(*cfg)
			require.ErrorContains(t, err, field)
			require.ErrorIs(t, err, loop.ErrUser)
		}
	})

	t.Run("info", func(t *testing.T) {
		p, err := openai.New(openai.Config{Model: "gpt-4.1", APIKey: "k"})
		require.NoError(t, err)
		require.Equal(t, loop.ProviderInfo{Name: "openai", Model: "gpt-4.1", Endpoint: openai.DefaultBaseURL, NativeJSONSchema: true, Vision: true}, p.Info())
	})
}

func ptr[T any](v T) *T { return &v }

func requireJSON(t *testing.T, want string, got any) {
	t.Helper()
	b, err := json.Marshal(got)
	require.NoError(t, err)
	require.JSONEq(t, want, string(b))
}
