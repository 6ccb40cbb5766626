// Package demo is an offline, deterministic model for `make run`, the
// documentation and demos. It implements [loop.Provider] without any
// network: it streams its answers word by word, calls a calculator tool for
// arithmetic questions and a time tool for time questions, then answers
// from their results; anything else gets a helpful reply that says plainly
// that it is an offline demo model.
//
// # Behaviour
//
// [Provider.Stream] looks at the view it is given:
//
//   - When the view ends with tool results, it answers from them: "12*7 = 84."
//     for the calculator, "The current time is …." for the time tool.
//   - Otherwise it reads the last user input. Arithmetic ("What is 12*7?",
//     "12 times 7") becomes a call to "calculator" with
//     {"expression": "12*7"}; a question about the time or date becomes a
//     call to "time_now" with {}; a question that asks both gets both calls
//     in one turn. A tool that the request does not offer is not called:
//     arithmetic is then worked out locally.
//   - Anything else is answered from the input, with a note of what the demo
//     model can do.
//
// Every turn reports an estimated usage (four characters a token) and a
// finish reason ("stop" or "tool_calls"). The same view always yields the
// same deltas.
package demo
