package provider

import (
	"net/http"

	"github.com/lovia-fleet/lovia/pkg/provider/anthropic"
	"github.com/lovia-fleet/lovia/pkg/provider/demo"
	"github.com/lovia-fleet/lovia/pkg/provider/internal/transport"
	"github.com/lovia-fleet/lovia/pkg/provider/openai"
)

// Environment variables read through [Config.Getenv].
const (
	EnvOpenAIKey        = "OPENAI_API_KEY"
	EnvOpenAIBaseURL    = "OPENAI_BASE_URL"
	EnvAnthropicKey     = "ANTHROPIC_API_KEY"
	EnvAnthropicBaseURL = "ANTHROPIC_BASE_URL"
)

// Config configures the built-in adapters of a registry. The zero value
// registers every prefix with the adapters' defaults and reads no
// environment.
type Config struct {
	// Getenv reads the environment: OPENAI_API_KEY, OPENAI_BASE_URL,
	// ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL. Nil reads nothing. An entry
	// point passes os.Getenv; tests pass a map lookup.
	Getenv func(string) string
	// HTTPClient is shared by every adapter whose own config sets none.
	// Default: one client, with one connection pool, per registry.
	HTTPClient *http.Client
	// OpenAI is the base config of OpenAI-compatible models ("openai:",
	// "openai-chat:", "oai:" and bare names). Model is set from the model
	// string; APIKey and BaseURL, when set, win over the environment.
	OpenAI openai.Config
	// Anthropic is the base config of "anthropic:" and "claude:" models,
	// with the same rules.
	Anthropic anthropic.Config
	// Demo configures the offline "demo" model.
	Demo demo.Config
}

// WithDefaults returns a copy of c with the environment applied (explicit
// fields win) and the shared HTTP client filled in.
func (c Config) WithDefaults() Config {
	getenv := c.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	if c.OpenAI.APIKey == "" {
		c.OpenAI.APIKey = getenv(EnvOpenAIKey)
	}
	if c.OpenAI.BaseURL == "" {
		c.OpenAI.BaseURL = getenv(EnvOpenAIBaseURL)
	}
	if c.Anthropic.APIKey == "" {
		c.Anthropic.APIKey = getenv(EnvAnthropicKey)
	}
	if c.Anthropic.BaseURL == "" {
		c.Anthropic.BaseURL = getenv(EnvAnthropicBaseURL)
	}
	if c.HTTPClient == nil {
		c.HTTPClient = transport.NewClient()
	}
	if c.OpenAI.HTTPClient == nil {
		c.OpenAI.HTTPClient = c.HTTPClient
	}
	if c.Anthropic.HTTPClient == nil {
		c.Anthropic.HTTPClient = c.HTTPClient
	}
	return c
}
