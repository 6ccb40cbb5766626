// Package anthropic is the adapter for the Anthropic Messages API and
// compatible hosts. It implements [loop.Provider] over the official SDK
// (github.com/anthropics/anthropic-sdk-go/v2) with the SDK's retries off,
// so the loop's retry policy is the only one.
//
// # Streaming
//
// [Provider.Stream] posts to "<BaseURL>/v1/messages" with "stream": true and
// turns the content blocks of the event stream into [loop.Delta] values:
// text deltas; tool_use blocks as tool-call fragments keyed by the block's
// index (the input arrives as partial JSON); thinking blocks as reasoning
// deltas, each finished block then emitted as an authoritative reasoning
// entry that carries its signature (or, for redacted thinking, the opaque
// data in Entry.Redacted) and this adapter's name. Those entries are sent
// back unchanged on the next request, in place, as the API requires; the
// reasoning of other adapters is never sent. The usage counts cache reads
// and writes inside the input tokens; stop reasons map to the loop's finish
// reasons (end_turn and stop_sequence → "stop", max_tokens → "length",
// tool_use → "tool_calls", refusal → "content_filter"). A stream that ends
// before "message_stop" is a retryable error.
//
// # Requests
//
// System inputs become the top-level system prompt, in order. User inputs
// and tool results fold into user messages (tool_result blocks paired by
// call id, images and PDFs as blocks); consecutive thinking, text and
// tool_use entries fold into one assistant message. The required max_tokens
// defaults to [DefaultMaxTokens]. [Config] opts into extended thinking
// (ThinkingBudget or AdaptiveThinking) and into prompt caching
// (PromptCaching: breakpoints on the last tool, the last system block and
// the last message). On the official host, models that support it get
// native structured output (output_config.format); elsewhere the loop puts
// the schema in the system prompt. The key is sent both as "x-api-key" (the
// documented header, which compatible hosts expect) and as the SDK's own
// credential.
//
// # Errors
//
// As in every adapter: 408, 429, 5xx (529 overloaded included), connection
// failures, timeouts, cut streams and the retryable error events of a
// stream (overloaded_error, rate_limit_error, api_error, timeout_error) are
// retryable [*loop.ProviderError] values with RetryAfter from
// "Retry-After"; other client errors are not, and their Hint says what to
// fix. "prompt is too long: N tokens > W maximum" becomes a
// [*loop.ContextOverflowError] with ReportedWindow W.
//
// # Context window
//
// [Provider.DiscoverContextWindow] reads "max_input_tokens" from the models
// API ("GET /v1/models/{model}"), memoized per provider.
package anthropic
