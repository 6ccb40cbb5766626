// Package openai is the adapter for the OpenAI Chat Completions API and
// every endpoint that speaks it: vLLM, SGLang, Ollama, LM Studio, llama.cpp,
// DeepSeek, Moonshot and gateways. It implements [loop.Provider] over the
// official SDK (github.com/openai/openai-go/v3) with the SDK's retries off,
// so the loop's retry policy is the only one.
//
// # Streaming
//
// [Provider.Stream] posts to "<BaseURL>/chat/completions" with "stream": true
// and turns the server-sent chunks into [loop.Delta] values: text, reasoning
// (the "reasoning_content" or "reasoning" field of compatible servers),
// tool-call fragments keyed by their index (several calls per turn,
// arguments split across chunks), then a reasoning entry carrying this
// adapter's name, the usage (cached prompt tokens included) and the finish
// reason. A stream that ends before "[DONE]" and before any finish reason
// is a retryable error, so the loop discards the partial turn and retries.
//
// # Requests
//
// System inputs stay system messages in place; consecutive reasoning, text
// and tool-call entries fold into one assistant message; tool results become
// tool messages paired by call id. The per-host differences are fields of
// [Config] with host-dependent defaults:
//
//   - NativeJSONSchema: a "json_schema" response_format on the official host;
//     elsewhere the loop puts the schema in the system prompt.
//   - MaxTokensField: "max_completion_tokens" on the official host,
//     "max_tokens" elsewhere.
//   - ReplayReasoning: reasoning_content is sent back to DeepSeek and
//     Moonshot, which require it; never reasoning written by another adapter.
//
// An empty APIKey sends no Authorization header, so keyless local servers
// work; the official host without a key fails at once, telling what to set.
//
// # Errors
//
// Stream returns a [*loop.ProviderError] whose Retryable feeds the loop's
// retry policy: 408, 429 and 5xx, connection failures, timeouts and cut
// streams are retryable, with RetryAfter taken from "Retry-After"; other
// 4xx (a bad key, a wrong base URL, a bad request) are not, and their Hint
// says what to fix. A prompt the endpoint rejects as too long becomes a
// [*loop.ContextOverflowError] whose ReportedWindow is the window the
// endpoint named. [ErrStreamTruncated] and the other sentinels of this
// package sit in the Cause chain.
//
// # Context window
//
// [Provider.DiscoverContextWindow] reads "max_model_len" (vLLM, SGLang) or
// "context_length" (OpenRouter) from the "/models" listing, memoized per
// provider, which is one endpoint and one model.
package openai
