package loop

import (
	"sync"
	"time"
)

// Budget caps a run. Zero fields are unlimited.
type Budget struct {
	MaxInputTokens  int64         `json:"max_input_tokens,omitempty" msgpack:"max_input_tokens,omitempty"`
	MaxOutputTokens int64         `json:"max_output_tokens,omitempty" msgpack:"max_output_tokens,omitempty"`
	MaxTotalTokens  int64         `json:"max_total_tokens,omitempty" msgpack:"max_total_tokens,omitempty"`
	MaxToolCalls    int           `json:"max_tool_calls,omitempty" msgpack:"max_tool_calls,omitempty"`
	MaxDuration     time.Duration `json:"-" msgpack:"-"`
}

// CancelToken is a run's cooperative cancellation switch. Cancelling it ends
// the run with RunCancelled at its next safe point and cancels the context
// of running tools. A token may be shared with sub-runs. The zero value is
// not usable; use NewCancelToken.
type CancelToken struct {
	mu     sync.Mutex
	reason string
	done   chan struct{}
	hooks  []func(reason string)
}

// NewCancelToken returns an untripped token.
func NewCancelToken() *CancelToken { return &CancelToken{done: make(chan struct{})} }

// Cancel trips the token; later calls are no-ops.
func (c *CancelToken) Cancel(reason string) {
	c.mu.Lock()
	select {
	case <-c.done:
		c.mu.Unlock()
		return
	default:
	}
	if reason == "" {
		reason = "run cancelled"
	}
	c.reason = reason
	close(c.done)
	hooks := c.hooks
	c.hooks = nil
	c.mu.Unlock()
	for _, h := range hooks {
		h(reason)
	}
}

// Done is closed when the token trips.
func (c *CancelToken) Done() <-chan struct{} { return c.done }

// Err returns a *RunCancelled once the token tripped, else nil.
func (c *CancelToken) Err() error {
	select {
	case <-c.done:
		c.mu.Lock()
		defer c.mu.Unlock()
		return &RunCancelled{Reason: c.reason}
	default:
		return nil
	}
}

// onCancel registers f to run when the token trips (at once if it has).
func (c *CancelToken) onCancel(f func(reason string)) {
	c.mu.Lock()
	select {
	case <-c.done:
		r := c.reason
		c.mu.Unlock()
		f(r)
		return
	default:
	}
	c.hooks = append(c.hooks, f)
	c.mu.Unlock()
}

// RunContext is the live state of one run that tools, hooks, guardrails,
// instructions and plugins see. Its accessors are safe for concurrent use.
type RunContext struct {
	// Deps are the caller's dependencies (WithDeps); never persisted.
	Deps any
	// RunID is the checkpoint run id ("" without checkpointing).
	RunID string
	// SessionID is the session the run appends to ("" without a session).
	SessionID string
	// Metadata is the caller's metadata (WithMetadata).
	Metadata map[string]any
	// Budget is the run's budget (nil when unlimited).
	Budget *Budget
	// Mailbox is the run's steering queue.
	Mailbox Mailbox
	// CancelToken is the run's cancellation switch.
	CancelToken *CancelToken

	runner  *Runner
	tracer  Tracer
	mu      sync.Mutex
	agent   *Agent
	turn    int
	usage   Usage
	entries []Entry
}

// Agent returns the active agent.
func (rc *RunContext) Agent() *Agent {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.agent
}

// Turn returns the current turn number (0 before the first turn).
func (rc *RunContext) Turn() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.turn
}

// Usage returns the usage accumulated so far, sub-runs included.
func (rc *RunContext) Usage() Usage {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.usage
}

// AddUsage folds u into the run's usage (used for sub-runs).
func (rc *RunContext) AddUsage(u Usage) {
	rc.mu.Lock()
	rc.usage.Add(u)
	rc.mu.Unlock()
}

// Entries returns a copy of the full transcript (system head, session
// history and this run's entries).
func (rc *RunContext) Entries() []Entry {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Entry(nil), rc.entries...)
}

// Cancel trips the run's cancel token.
func (rc *RunContext) Cancel(reason string) { rc.CancelToken.Cancel(reason) }

func (rc *RunContext) setAgent(a *Agent) {
	rc.mu.Lock()
	rc.agent = a
	rc.mu.Unlock()
}

func (rc *RunContext) setTurn(n int) {
	rc.mu.Lock()
	rc.turn = n
	rc.mu.Unlock()
}
