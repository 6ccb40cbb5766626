package loop

import "context"

// CompactRequest is one question to a context policy: which view of the
// transcript should the next model call see?
type CompactRequest struct {
	// Entries is the full transcript. It shares memory with the run:
	// policies must not modify its elements.
	Entries []Entry
	// Provider and Model identify the endpoint.
	Provider Provider
	Model    string
	// Tools ride along in the request (their schemas cost tokens).
	Tools []ToolSchema
	// LastInputTokens is the provider's count for the previous call (0 when
	// unknown or on the reactive path).
	LastInputTokens int64
	// Overflow is true on the reactive path, after a ContextOverflowError;
	// ReportedWindow is the window that error named (0 if none).
	Overflow       bool
	ReportedWindow int
	// State is the policy's sticky scratch, owned by the run and carried in
	// checkpoints and session meta. The policy may modify it.
	State map[string]any
	// AddUsage bills the run for model calls the policy makes (summaries).
	// Nil when there is no run to bill.
	AddUsage func(Usage)
}

// CompactResult is a policy's answer.
type CompactResult struct {
	// Entries is the view (used when Changed).
	Entries []Entry
	// Changed reports that the view differs from the transcript.
	Changed bool
	// Compacted reports new decisions this call (emits ContextCompacted).
	Compacted    bool
	Reason       string
	Summary      *string
	TokensBefore int
	TokensAfter  int
	Detail       []string
	// Estimate is the policy's token estimate of the view (0 if unknown),
	// used to decide whether a reactive retry is meaningfully smaller.
	Estimate int
}

// ContextPolicy derives the view of the transcript sent to the model. The
// transcript, checkpoint and session are never changed by it.
type ContextPolicy interface {
	Compact(ctx context.Context, req *CompactRequest) (*CompactResult, error)
}

// ContextPolicyTools is implemented by policies that offer tools (such as
// recall_tool_result); they are added last and silently shadowed by any
// tool of the same name.
type ContextPolicyTools interface {
	Tools() []*Tool
}

// NoopContextPolicy sends the whole transcript.
type NoopContextPolicy struct{}

// Compact returns the transcript unchanged.
func (NoopContextPolicy) Compact(_ context.Context, req *CompactRequest) (*CompactResult, error) {
	return &CompactResult{Entries: req.Entries}, nil
}
