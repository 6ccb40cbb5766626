// Package provider makes real model endpoints first-class: it registers the
// built-in adapters under the model-string prefixes of the agents file, and
// its subpackages implement them.
//
// # Model strings
//
// A model string is "prefix:model" or a bare name:
//
//	openai:gpt-4.1-mini        OpenAI Chat Completions (also openai-chat:, oai:)
//	anthropic:claude-sonnet-4-5  Anthropic Messages (also claude:)
//	llama3.1:8b                a bare name: the OpenAI-compatible endpoint
//	demo                       the offline demo model
//
// [NewRegistry] (or [Register] on an existing [loop.Registry]) wires them;
// users add their own prefixes with [loop.Registry.Register]. A bare name
// that contains a colon, such as Ollama's "llama3.1:8b", needs an explicit
// prefix ("oai:llama3.1:8b"), since the part before the first colon is the
// prefix.
//
// # Configuration
//
// [Config] carries one base config per adapter; the model comes from the
// model string. Credentials and addresses come from OPENAI_API_KEY,
// OPENAI_BASE_URL, ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL, read through
// the injected [Config.Getenv] (nothing is read from the process
// environment behind the caller's back), and explicit fields win. Without
// OPENAI_BASE_URL the OpenAI adapter calls api.openai.com; point it at
// "http://localhost:11434/v1" (Ollama), "http://localhost:8000/v1" (vLLM) or
// any gateway, with or without a key.
//
// # Adapters
//
//   - [github.com/lovia-fleet/lovia/pkg/provider/openai]: Chat Completions
//     and every compatible server.
//   - [github.com/lovia-fleet/lovia/pkg/provider/anthropic]: the Messages API.
//   - [github.com/lovia-fleet/lovia/pkg/provider/demo]: an offline,
//     deterministic model for demos and docs.
//
// Every adapter streams from the calling goroutine, leaves retries to the
// loop's retry policy (the SDKs' own retries are off) and fails with a
// [loop.ProviderError] whose Retryable, RetryAfter and Hint say whether to
// retry and what to fix, or with a [loop.ContextOverflowError] carrying the
// window the endpoint named.
package provider
