package provider_test

import (
	"fmt"

	"github.com/lovia-fleet/lovia/pkg/provider"
)

// Model strings resolve through the registry; credentials and base URLs
// come from the injected environment (a map here, os.Getenv in a main).
func ExampleNewRegistry() {
	environ := map[string]string{
		"OPENAI_BASE_URL":   "http://localhost:11434/v1",
		"ANTHROPIC_API_KEY": "sk-ant-…",
	}
	reg := provider.NewRegistry(provider.Config{Getenv: func(k string) string { return environ[k] }})
	for _, spec := range []string{"openai:gpt-4.1-mini", "oai:llama3.1:8b", "qwen3", "claude:claude-sonnet-4-5", "demo"} {
		p, err := reg.Resolve(spec)
		if err != nil {
			fmt.Println(err)
			continue
		}
		info := p.Info()
		fmt.Printf("%-25s → %s %s at %s\n", spec, info.Name, info.Model, info.Endpoint)
	}
	_, err := reg.Resolve("gemini:flash")
	fmt.Println(err)
	// Output:
	// openai:gpt-4.1-mini       → openai gpt-4.1-mini at http://localhost:11434/v1
	// oai:llama3.1:8b           → openai llama3.1:8b at http://localhost:11434/v1
	// qwen3                     → openai qwen3 at http://localhost:11434/v1
	// claude:claude-sonnet-4-5  → anthropic claude-sonnet-4-5 at https://api.anthropic.com
	// demo                      → demo demo at offline
	// unknown model "gemini:flash"
	//   hint: write the model as prefix:model, with a known prefix: anthropic, claude, demo, oai, openai, openai-chat; or a bare model name for the OpenAI-compatible endpoint (OPENAI_BASE_URL)
}
