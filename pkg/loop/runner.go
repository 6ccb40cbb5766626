package loop

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// RunnerConfig configures a Runner. The zero value is usable.
type RunnerConfig struct {
	// Registry resolves agents' model strings (nil: agents must set
	// Provider).
	Registry *Registry
	// Logger receives run logs (nil: discarded).
	Logger *slog.Logger
	// Tracer opens spans (nil: NoopTracer).
	Tracer Tracer
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// ContextPolicy is the policy of agents and runs that set none (nil:
	// the whole transcript is the view). The compaction package provides
	// lovia's default.
	ContextPolicy ContextPolicy
}

// Runner executes runs. It holds no per-run state and is safe for
// concurrent use.
type Runner struct {
	registry *Registry
	logger   *slog.Logger
	tracer   Tracer
	now      func() time.Time
	policy   ContextPolicy
	toolsets sync.Map // toolsetKey → *toolset
	toolsetN atomic.Int64
}

// NewRunner returns a Runner.
func NewRunner(cfg RunnerConfig) *Runner {
	r := &Runner{registry: cfg.Registry, logger: cfg.Logger, tracer: cfg.Tracer, now: cfg.Now, policy: cfg.ContextPolicy}
	if r.logger == nil {
		r.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if r.tracer == nil {
		r.tracer = NoopTracer{}
	}
	if r.now == nil {
		r.now = time.Now
	}
	return r
}

// IfRunExists is the policy when a run id already has a checkpoint.
type IfRunExists string

// IfRunExists policies.
const (
	// ResumeRun resumes a stored run (replays a completed one), else starts
	// fresh. The default.
	ResumeRun IfRunExists = "resume"
	// RestartRun deletes a stored run and starts fresh.
	RestartRun IfRunExists = "restart"
	// FailRun refuses when a run is stored.
	FailRun IfRunExists = "fail"
	// ResumeOnly resumes or replays a stored run and refuses when none is.
	ResumeOnly IfRunExists = "resume_only"
)

// RunOption configures one run.
type RunOption func(*runOptions)

type runOptions struct {
	deps              any
	metadata          map[string]any
	output            *OutputSpec
	outputSet         bool
	extraInstructions string
	maxTurns          int
	budget            *Budget
	cancel            *CancelToken
	mailbox           Mailbox
	retry             *RetryPolicy
	contextPolicy     ContextPolicy
	session           Session
	sessionID         string
	checkpointer      Checkpointer
	runID             string
	ifRunExists       IfRunExists
	deleteOnSuccess   bool
	resumeFrom        *Snapshot
	tracer            Tracer
	parent            *RunContext
	approvalHandler   ApprovalHandler
	hooks             *Hooks
}

// WithDeps passes dependencies to tools, hooks and instructions (RunContext.Deps).
func WithDeps(deps any) RunOption { return func(o *runOptions) { o.deps = deps } }

// WithMetadata attaches caller metadata (RunContext.Metadata).
func WithMetadata(m map[string]any) RunOption { return func(o *runOptions) { o.metadata = m } }

// WithOutput overrides the output spec of every agent the run reaches (nil
// forces plain text).
func WithOutput(s *OutputSpec) RunOption {
	return func(o *runOptions) { o.output, o.outputSet = s, true }
}

// WithExtraInstructions appends text to every active agent's system prompt.
func WithExtraInstructions(s string) RunOption {
	return func(o *runOptions) { o.extraInstructions = s }
}

// WithMaxTurns sets the turn limit (default 50).
func WithMaxTurns(n int) RunOption { return func(o *runOptions) { o.maxTurns = n } }

// WithBudget caps the run.
func WithBudget(b Budget) RunOption { return func(o *runOptions) { o.budget = &b } }

// WithCancelToken uses a caller-owned cancel token.
func WithCancelToken(t *CancelToken) RunOption { return func(o *runOptions) { o.cancel = t } }

// WithMailbox uses a caller-owned steering mailbox.
func WithMailbox(m Mailbox) RunOption { return func(o *runOptions) { o.mailbox = m } }

// WithRetry overrides the entry agent's provider retry policy.
func WithRetry(p *RetryPolicy) RunOption { return func(o *runOptions) { o.retry = p } }

// WithContextPolicy overrides the entry agent's context policy.
func WithContextPolicy(p ContextPolicy) RunOption {
	return func(o *runOptions) { o.contextPolicy = p }
}

// WithSession loads history from and appends the completed run to a session.
func WithSession(s Session, sessionID string) RunOption {
	return func(o *runOptions) { o.session, o.sessionID = s, sessionID }
}

// WithCheckpoint checkpoints the run under runID.
func WithCheckpoint(c Checkpointer, runID string) RunOption {
	return func(o *runOptions) { o.checkpointer, o.runID = c, runID }
}

// WithIfRunExists sets the policy for a run id that already has a
// checkpoint (default ResumeRun).
func WithIfRunExists(p IfRunExists) RunOption { return func(o *runOptions) { o.ifRunExists = p } }

// WithDeleteOnSuccess deletes the checkpoint when the run completes.
func WithDeleteOnSuccess() RunOption { return func(o *runOptions) { o.deleteOnSuccess = true } }

// WithResumeFrom rehydrates a run from a snapshot directly (its RunID
// becomes the run id).
func WithResumeFrom(s *Snapshot) RunOption { return func(o *runOptions) { o.resumeFrom = s } }

// WithTracer overrides the runner's tracer.
func WithTracer(t Tracer) RunOption { return func(o *runOptions) { o.tracer = t } }

// WithParent folds this run's usage into a parent run (agent-as-tool).
func WithParent(rc *RunContext) RunOption { return func(o *runOptions) { o.parent = rc } }

// WithApprovalHandler overrides the agents' approval handlers for this run.
func WithApprovalHandler(h ApprovalHandler) RunOption {
	return func(o *runOptions) { o.approvalHandler = h }
}

// WithHooks adds run-level hooks that observe every event after the agents'
// and plugins' hooks.
func WithHooks(h *Hooks) RunOption { return func(o *runOptions) { o.hooks = h } }

func (o *runOptions) validate() error {
	if o.session != nil && o.sessionID == "" {
		return &UserError{Message: "a session was given without a session id", Hint: "pass WithSession(store, sessionID) with a non-empty id"}
	}
	if o.checkpointer != nil && o.runID == "" && o.resumeFrom == nil {
		return &UserError{Message: "a checkpointer was given without a run id", Hint: "pass WithCheckpoint(store, runID) with a non-empty run id"}
	}
	if o.resumeFrom != nil {
		if o.resumeFrom.RunID == "" {
			return &UserError{Message: "the snapshot to resume from has no run id"}
		}
		if o.runID != "" && o.runID != o.resumeFrom.RunID {
			return &UserError{Message: fmt.Sprintf("run id %q differs from the snapshot's %q", o.runID, o.resumeFrom.RunID), Hint: "omit the run id or use the snapshot's"}
		}
		o.runID = o.resumeFrom.RunID
	}
	if o.deleteOnSuccess && o.checkpointer == nil {
		return &UserError{Message: "delete on success needs a checkpointer", Hint: "pass WithCheckpoint as well"}
	}
	switch o.ifRunExists {
	case "":
		o.ifRunExists = ResumeRun
	case ResumeRun, RestartRun, FailRun, ResumeOnly:
	default:
		return &UserError{Message: fmt.Sprintf("if_run_exists %q is not one of resume, restart, fail, resume_only", o.ifRunExists)}
	}
	if o.maxTurns == 0 {
		o.maxTurns = 50
	}
	if o.maxTurns < 0 {
		return &UserError{Message: fmt.Sprintf("max_turns %d is negative", o.maxTurns)}
	}
	return nil
}

// RunResult is a completed run.
type RunResult struct {
	// Output is the final text, or the decoded structured output.
	Output any
	// Entries are this run's own transcript entries (no system head, no
	// session history).
	Entries []Entry
	// FinalAgent is the agent active at the end.
	FinalAgent string
	Usage      Usage
	Turns      int
	// FinishReason is the last model turn's (nil when unreported or
	// replayed).
	FinishReason *string
	// LastInputTokens is the prompt size of the final model call.
	LastInputTokens int64
	// RunID is the checkpoint run id ("" without checkpointing).
	RunID string
	// Replayed is true when the result came from a completed checkpoint.
	Replayed bool
}

// Text returns the output as text: the string itself, or its JSON.
func (r *RunResult) Text() string {
	if s, ok := r.Output.(string); ok {
		return s
	}
	b, _ := json.Marshal(r.Output)
	return string(b)
}

// Run executes a run to its end and returns its result.
func (r *Runner) Run(ctx context.Context, agent *Agent, input []Entry, opts ...RunOption) (*RunResult, error) {
	return r.Stream(ctx, agent, input, opts...).Result()
}

// Stream prepares a run; nothing executes until the handle is iterated or
// its Result is awaited. Misconfiguration found here is reported by Result
// with no events.
func (r *Runner) Stream(ctx context.Context, agent *Agent, input []Entry, opts ...RunOption) *RunHandle {
	h := &RunHandle{done: make(chan struct{}), approvals: newApprovals()}
	var o runOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.validate(); err != nil {
		h.startErr = err
		return h
	}
	if agent == nil {
		h.startErr = &UserError{Message: "no agent given", Hint: "pass a *loop.Agent"}
		return h
	}
	h.run = newRun(ctx, r, agent, input, o, h.approvals)
	return h
}
