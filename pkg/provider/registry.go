package provider

import (
	"sync"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/provider/anthropic"
	"github.com/lovia-fleet/lovia/pkg/provider/demo"
	"github.com/lovia-fleet/lovia/pkg/provider/openai"
)

// Prefixes of the built-in adapters in model strings ("prefix:model").
// A bare name ("" prefix) is an OpenAI-compatible model; "demo" is the
// offline demo model.
const (
	PrefixOpenAI     = "openai"
	PrefixOpenAIChat = "openai-chat"
	PrefixOAI        = "oai"
	PrefixAnthropic  = "anthropic"
	PrefixClaude     = "claude"
	PrefixDemo       = "demo"
	PrefixBare       = ""
)

// NewRegistry returns a registry with the built-in adapters registered
// (see [Register]).
func NewRegistry(cfg Config) *loop.Registry {
	r := &loop.Registry{}
	Register(r, cfg)
	return r
}

// Register adds the built-in adapters to r: "openai", "openai-chat", "oai"
// and bare names resolve to the OpenAI-compatible adapter, "anthropic" and
// "claude" to the Anthropic adapter, "demo" to the demo model. Users add
// their own prefixes with r.Register; a later registration replaces an
// earlier one.
//
// Each factory builds one provider per model and hands the same one to
// every run that asks for it, so that connection pools and discovered
// context windows are shared (providers are safe for concurrent use).
// Configuration errors surface when a model string is resolved, as a
// *loop.UserError naming the bad field.
func Register(r *loop.Registry, cfg Config) {
	cfg = cfg.WithDefaults()
	oa := cached(func(model string) (loop.Provider, error) {
		c := cfg.OpenAI
		c.Model = model
		return openai.New(c)
	})
	for _, prefix := range []string{PrefixOpenAI, PrefixOpenAIChat, PrefixOAI, PrefixBare} {
		r.Register(prefix, oa)
	}
	an := cached(func(model string) (loop.Provider, error) {
		c := cfg.Anthropic
		c.Model = model
		return anthropic.New(c)
	})
	r.Register(PrefixAnthropic, an)
	r.Register(PrefixClaude, an)
	r.Register(PrefixDemo, cached(func(model string) (loop.Provider, error) {
		c := cfg.Demo
		if model != "" {
			c.Model = model
		}
		return demo.New(c)
	}))
}

// cached wraps a factory so that each model is built once; failures are
// not remembered.
func cached(build loop.ProviderFactory) loop.ProviderFactory {
	var (
		mu    sync.Mutex
		built = map[string]loop.Provider{}
	)
	return func(model string) (loop.Provider, error) {
		mu.Lock()
		defer mu.Unlock()
		if p, ok := built[model]; ok {
			return p, nil
		}
		p, err := build(model)
		if err != nil {
			return nil, err
		}
		built[model] = p
		return p, nil
	}
}
