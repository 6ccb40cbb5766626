// Package compaction is lovia's default context policy: it keeps a long
// conversation inside the model's context window by shrinking only the
// view sent to the model — never the transcript, the checkpoint or the
// session.
//
// # The pipeline
//
// [New] returns a [Compaction], a loop.ContextPolicy. Before every model
// call the runner asks it for the view. Below the trigger watermark
// ([Config.CompactAt], 85% of the usable window by default) the view is
// the transcript as last rendered. At the trigger, cheap-first stages run
// until the estimate is down to [Config.CompactTo] (60%):
//
//   - [Offload] shows huge tool results as a preview and archives the full
//     output in a [ResultStore] under its content [Digest];
//   - [Clear] replaces older tool results with a marker that keeps the call
//     id and the error flag;
//   - [Summarize] folds old history into an incremental summary with six
//     sections, written by a [Summarizer] — by default an [LLMSummarizer]
//     on the run's own provider at temperature 0 — skipped when it would
//     save less than 10% and behind a per-run circuit breaker.
//
// The newest entries (the protected tail, [Config.KeepRecentTokens]) are
// never touched, and no cut ever separates a tool call from its result.
// Custom stages implement [Stage] and decide through a [PlanContext].
//
// # Sticky decisions and prompt caches
//
// Stages only record decisions (cleared call ids, offload records, the
// summary and its coverage) in the run's state; a pure render function
// rebuilds the view from transcript and state on every call. Decisions are
// never undone and markers are built from the records alone, so the
// rendered prefix stays byte-identical from turn to turn and provider
// prompt caches stay warm; the gap between the watermarks keeps new
// decisions rare. The state is plain JSON-like data under [StateKey] in
// the run's context state: the runner carries it in the checkpoint head
// and in the session segment's meta, so a run resumed on another worker,
// or the next run on the session, renders the same view.
//
// # Estimates and windows
//
// Tokens are estimated as UTF-8 bytes / 4 per entry ([EstimateEntry]) plus
// the tool schemas ([EstimateTools]), or by the provider when it implements
// loop.TokenEstimator, and calibrated by a moving average against the
// provider's real input-token counts. The window is [Config.ContextWindow],
// else what the provider reports (loop.ContextWindowDiscoverer, asked once
// per endpoint and model), capped by any window an overflow error named;
// with none, compaction is reactive only. On a loop.ContextOverflowError
// the runner asks once more with Overflow set: the policy learns the
// window, aims at a quarter of it and may offload even protected results
// that alone exceed the target.
//
// # Recall
//
// The policy offers the recall_tool_result tool ([RecallTool]): it returns
// a full output by the reference a marker names, from the store first,
// then from the transcript, and never runs a tool again. [MemoryStore] is
// an in-process LRU store; a shared store lets every worker recall what
// another offloaded.
package compaction
