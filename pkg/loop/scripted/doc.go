// Package scripted is a deterministic model for tests, examples and
// end-to-end runs without an LLM. A [Provider] replays a script of [Step]s:
// text (streamed word by word), reasoning, tool calls, literal argument
// text, finish reasons, delays and injected failures.
//
// By default the provider picks its step by the number of model turns
// already in the request's transcript (each run of consecutive assistant
// entries is one turn), so a run resumed on another process continues the
// script where it stopped. [Sequential] makes each call consume the next
// step instead, the way lovia's reference harness does.
package scripted
