package anthropic

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
const Name = "anthropic"

// Defaults of [Config].
const (
	DefaultBaseURL          = "https://api.anthropic.com"
	DefaultMaxTokens        = 8192
	DefaultTimeout          = 10 * time.Minute
	DefaultIdleTimeout      = 5 * time.Minute
	DefaultDiscoveryTimeout = 30 * time.Second
	// MinThinkingBudget is the smallest budget the API accepts.
	MinThinkingBudget = 1024
)

// Config configures one model on the Anthropic Messages API or a compatible
// host. Only Model is required; [Config.WithDefaults] documents and fills
// every default.
type Config struct {
	// Model is the model name sent with every request. Required.
	Model string
	// BaseURL is the API root, before "/v1/messages". Default
	// [DefaultBaseURL]; a trailing "/v1" is dropped.
	BaseURL string
	// APIKey authenticates the requests (sent as "x-api-key" and as the
	// SDK's bearer credential). Empty sends none, for keyless compatible
	// hosts; a call to the official host without a key fails at once.
	APIKey string
	// HTTPClient sends the requests. Default: a client with its own
	// connection pool and dial/TLS timeouts but no overall timeout.
	HTTPClient *http.Client
	// Timeout bounds one whole call when the caller's context has no
	// deadline. Default [DefaultTimeout]; negative disables.
	Timeout time.Duration
	// IdleTimeout bounds the wait for the response headers and for every
	// next stream event. Default [DefaultIdleTimeout]; negative disables.
	IdleTimeout time.Duration
	// DiscoveryTimeout bounds a models-API lookup when the caller's context
	// has no deadline. Default [DefaultDiscoveryTimeout]; negative disables.
	DiscoveryTimeout time.Duration
	// MaxTokens is the required "max_tokens" of requests whose
	// ModelSettings.MaxTokens is 0. Default [DefaultMaxTokens].
	MaxTokens int
	// ThinkingBudget, when > 0, enables extended thinking with this many
	// tokens (at least [MinThinkingBudget]); max_tokens is raised above it
	// when needed and temperature is not sent, as the API requires.
	ThinkingBudget int
	// AdaptiveThinking sends thinking {"type": "adaptive"}: the model
	// decides how much to think. It excludes ThinkingBudget.
	AdaptiveThinking bool
	// PromptCaching marks cache breakpoints ("cache_control": ephemeral) on
	// the last tool, the last system block and the last block of the last
	// message, so that a conversation's prefix is read from the cache on
	// the next turn. Off by default (cache writes cost more than reads).
	PromptCaching bool
	// CacheTTL is the breakpoints' time to live: "" (the API's default of
	// 5 minutes), "5m" or "1h".
	CacheTTL string
	// NativeJSONSchema sends ModelRequest.ResponseFormat as
	// output_config.format (a JSON schema the API enforces) and strict tool
	// schemas. Default: true on the official host for models that support
	// structured outputs (not the claude-3 family nor the 4.0 models),
	// false elsewhere (the loop then puts the schema in the system prompt).
	NativeJSONSchema *bool
	// ContextWindow, when > 0, is the model's context window in tokens:
	// DiscoverContextWindow returns it without asking the endpoint.
	ContextWindow int
	// Headers are set on every request (e.g. "anthropic-beta").
	Headers map[string]string
	// Now is the clock used for Retry-After dates. Default time.Now.
	Now func() time.Time
}

// WithDefaults returns a copy of c with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.BaseURL == "" {
		c.BaseURL = DefaultBaseURL
	}
	c.BaseURL = strings.TrimSuffix(strings.TrimRight(c.BaseURL, "/"), "/v1")
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
	if c.MaxTokens == 0 {
		c.MaxTokens = DefaultMaxTokens
	}
	if c.NativeJSONSchema == nil {
		native := isOfficial(c.BaseURL) && structuredOutputs(c.Model)
		c.NativeJSONSchema = &native
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// validate reports the first bad field of a config that went through
// WithDefaults.
func (c Config) validate() error {
	switch {
	case strings.TrimSpace(c.Model) == "":
		return fmt.Errorf("anthropic: Config.Model is required (the model name, e.g. \"claude-sonnet-4-5\")")
	case c.MaxTokens < 1:
		return fmt.Errorf("anthropic: Config.MaxTokens %d must be positive", c.MaxTokens)
	case c.ThinkingBudget < 0 || (c.ThinkingBudget > 0 && c.ThinkingBudget < MinThinkingBudget):
		return fmt.Errorf("anthropic: Config.ThinkingBudget %d must be 0 (off) or at least %d", c.ThinkingBudget, MinThinkingBudget)
	case c.ThinkingBudget > 0 && c.AdaptiveThinking:
		return fmt.Errorf("anthropic: Config.ThinkingBudget and Config.AdaptiveThinking exclude each other")
	case c.CacheTTL != "" && c.CacheTTL != "5m" && c.CacheTTL != "1h":
		return fmt.Errorf("anthropic: Config.CacheTTL %q is neither \"5m\" nor \"1h\"", c.CacheTTL)
	case c.ContextWindow < 0:
		return fmt.Errorf("anthropic: Config.ContextWindow %d is negative", c.ContextWindow)
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("anthropic: Config.BaseURL %q is not an http(s) URL (e.g. %q)", c.BaseURL, DefaultBaseURL)
	}
	return nil
}

// isOfficial reports whether baseURL is Anthropic's own API.
func isOfficial(baseURL string) bool {
	u, err := url.Parse(baseURL)
	return err == nil && strings.EqualFold(u.Hostname(), "api.anthropic.com")
}

// structuredOutputs reports whether a model accepts output_config.format:
// every model but the claude-3 family and the 4.0 releases.
func structuredOutputs(model string) bool {
	m := strings.ToLower(model)
	for _, old := range []string{"claude-3", "claude-sonnet-4-0", "claude-sonnet-4-2025", "claude-opus-4-0", "claude-opus-4-2025"} {
		if strings.HasPrefix(m, old) {
			return false
		}
	}
	return true
}
