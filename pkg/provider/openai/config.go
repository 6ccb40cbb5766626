package openai

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/lovia-fleet/lovia/pkg/provider/internal/transport"
)

// Name is the adapter name: ProviderInfo.Name, ProviderError.Vendor and the
// Provider of the reasoning entries this adapter writes.
const Name = "openai"

// Defaults of [Config].
const (
	DefaultBaseURL          = "https://api.openai.com/v1"
	DefaultTimeout          = 10 * time.Minute
	DefaultIdleTimeout      = 5 * time.Minute
	DefaultDiscoveryTimeout = 30 * time.Second
)

// Request fields that can carry ModelSettings.MaxTokens.
const (
	MaxCompletionTokens = "max_completion_tokens"
	MaxTokens           = "max_tokens"
)

// Config configures one model on an OpenAI Chat Completions endpoint: the
// official API or any compatible server (vLLM, Ollama, LM Studio, llama.cpp,
// DeepSeek, gateways). Only Model is required; [Config.WithDefaults]
// documents and fills every default.
type Config struct {
	// Model is the model name sent with every request. Required.
	Model string
	// BaseURL is the API root, the part before "/chat/completions".
	// Default [DefaultBaseURL].
	BaseURL string
	// APIKey is sent as a bearer token. Empty sends no Authorization header,
	// which keyless local servers accept; a call to the official host
	// without a key fails at once with a hint.
	APIKey string
	// HTTPClient sends the requests. Default: a client with its own
	// connection pool and dial/TLS timeouts but no overall timeout (Timeout
	// and IdleTimeout bound calls).
	HTTPClient *http.Client
	// Timeout bounds one whole call (request and stream) when the caller's
	// context has no deadline. Default [DefaultTimeout]; negative disables.
	Timeout time.Duration
	// IdleTimeout bounds the wait for the response headers and for every
	// next stream event. Default [DefaultIdleTimeout]; negative disables.
	IdleTimeout time.Duration
	// DiscoveryTimeout bounds a "/models" lookup when the caller's context
	// has no deadline. Default [DefaultDiscoveryTimeout]; negative disables.
	DiscoveryTimeout time.Duration
	// ContextWindow, when > 0, is the model's context window in tokens:
	// DiscoverContextWindow returns it without asking the endpoint.
	ContextWindow int
	// NativeJSONSchema sends ModelRequest.ResponseFormat as a "json_schema"
	// response_format. Default: true on the official host only (elsewhere
	// the loop puts the schema in the system prompt).
	NativeJSONSchema *bool
	// MaxTokensField names the request field that carries
	// ModelSettings.MaxTokens: [MaxCompletionTokens] (the default on the
	// official host) or [MaxTokens] (the default elsewhere).
	MaxTokensField string
	// ReplayReasoning sends the reasoning this adapter streamed (from
	// "reasoning_content") back on later requests as the assistant
	// message's reasoning_content. Default: true for hosts that require it
	// (api.deepseek.com, api.moonshot.ai, api.moonshot.cn), false elsewhere.
	ReplayReasoning *bool
	// StreamUsage asks for the final usage chunk
	// (stream_options.include_usage). Default true.
	StreamUsage *bool
	// Vision states that image parts reach the model (ProviderInfo.Vision).
	// Default true; when false, image parts are sent as their text
	// projection.
	Vision *bool
	// Headers are set on every request (e.g. a gateway's routing header).
	Headers map[string]string
	// Now is the clock used for Retry-After dates. Default time.Now.
	Now func() time.Time
}

// WithDefaults returns a copy of c with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.BaseURL == "" {
		c.BaseURL = DefaultBaseURL
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	if c.HTTPClient == nil {
		c.HTTPClient = transport.NewClient()
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.DiscoveryTimeout == 0 {
		c.DiscoveryTimeout = DefaultDiscoveryTimeout
	}
	official := isOfficial(c.BaseURL)
	if c.NativeJSONSchema == nil {
		c.NativeJSONSchema = ptr(official)
	}
	if c.MaxTokensField == "" {
		c.MaxTokensField = MaxTokens
		if official {
			c.MaxTokensField = MaxCompletionTokens
		}
	}
	if c.ReplayReasoning == nil {
		c.ReplayReasoning = ptr(replaysReasoning(c.BaseURL))
	}
	if c.StreamUsage == nil {
		c.StreamUsage = ptr(true)
	}
	if c.Vision == nil {
		c.Vision = ptr(true)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// validate reports the first bad field of a config that went through
// WithDefaults.
func (c Config) validate() error {
	if strings.TrimSpace(c.Model) == "" {
		return fmt.Errorf("openai: Config.Model is required (the model name, e.g. \"gpt-4.1-mini\")")
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("openai: Config.BaseURL %q is not an http(s) URL (e.g. \"http://localhost:11434/v1\")", c.BaseURL)
	}
	if c.MaxTokensField != MaxTokens && c.MaxTokensField != MaxCompletionTokens {
		return fmt.Errorf("openai: Config.MaxTokensField %q is neither %q nor %q", c.MaxTokensField, MaxCompletionTokens, MaxTokens)
	}
	if c.ContextWindow < 0 {
		return fmt.Errorf("openai: Config.ContextWindow %d is negative", c.ContextWindow)
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

func hostOf(baseURL string) string {
	u, err := url.Parse(baseURL)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Hostname())
}

// isOfficial reports whether baseURL is OpenAI's own API.
func isOfficial(baseURL string) bool { return hostOf(baseURL) == "api.openai.com" }

// replaysReasoning reports whether the host expects reasoning_content back
// on assistant messages.
func replaysReasoning(baseURL string) bool {
	switch hostOf(baseURL) {
	case "api.deepseek.com", "api.moonshot.ai", "api.moonshot.cn":
		return true
	}
	return false
}
