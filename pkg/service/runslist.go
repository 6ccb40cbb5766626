package service

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/runindex"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// runIndexIdle is how long an API keeps its run index live without a
// listing or a description: past it, the watch stops (a worker's API
// that answered one listing does not follow every run for ever), and the
// next listing builds the index again.
const runIndexIdle = 10 * time.Minute

// indexState is the API's run index: a runindex.Feed started by the first
// listing or description, stopped when idle and by Service.Stop.
type indexState struct {
	mu      sync.Mutex
	feed    *runindex.Feed
	stopped bool
	used    time.Time
	idle    *time.Timer
	// idleAfter is runIndexIdle unless a test sets it.
	idleAfter time.Duration
	// pinned keeps the index live until the service stops (WarmRunIndex).
	pinned bool
}

func (s *indexState) idleLimit() time.Duration {
	if s.idleAfter > 0 {
		return s.idleAfter
	}
	return runIndexIdle
}

// WarmRunIndex starts loading the run index now, without waiting for it,
// so that the first listing does not wait for the load (about a second
// at 100,000 runs), and keeps it live until the service stops, however
// long no listing comes: a gateway, which serves the console, calls it at
// start.
func (a *API) WarmRunIndex(ctx context.Context) error {
	a.index.mu.Lock()
	a.index.pinned = true
	a.index.mu.Unlock()
	_, err := a.startIndex(ctx)
	return err
}

// RunCounts returns the runs of the run index by status, and how many
// await a decision, without waiting for an index that is not loaded yet
// (then ok is false). Every API instance's index holds every run: the
// counts are the fleet's.
func (a *API) RunCounts() (counts map[store.RunStatus]int, awaiting int, ok bool) {
	a.index.mu.Lock()
	f := a.index.feed
	a.index.mu.Unlock()
	if f == nil {
		return nil, 0, false
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // do not wait for a load
	x, err := f.Index(ctx)
	if err != nil {
		return nil, 0, false
	}
	now := time.Now()
	all, err := x.Query(runindex.Query{Limit: 1}, now)
	if err != nil {
		return nil, 0, false
	}
	waits, err := x.Query(runindex.Query{Limit: 1, Awaiting: true}, now)
	if err != nil {
		return nil, 0, false
	}
	for _, n := range waits.Counts {
		awaiting += n
	}
	return all.Counts, awaiting, true
}

// runIndex returns the live run index, starting its feed on first use and
// waiting (within ctx) for it to load.
func (a *API) runIndex(ctx context.Context) (*runindex.Index, error) {
	f, err := a.startIndex(ctx)
	if err != nil {
		return nil, err
	}
	x, err := f.Index(ctx)
	if errors.Is(err, runindex.ErrNotReady) {
		return nil, &bus.APIError{Type: bus.TypeInternal, Message: "the run index is still loading",
			Hint: "retry in a few seconds: this API instance is reading the run index bucket for the first time"}
	}
	return x, err
}

// startIndex returns the run index's feed, started if it was not.
func (a *API) startIndex(ctx context.Context) (*runindex.Feed, error) {
	s := &a.index
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil, &bus.APIError{Type: bus.TypeInternal, Message: "the API service is stopping", Hint: "retry: another API instance answers"}
	}
	s.used = time.Now()
	if s.feed == nil {
		f, err := runindex.NewFeed(runindex.FeedConfig{Runs: a.cfg.Store.Runs(), Conn: a.cfg.Conn, Logger: a.log})
		if err == nil {
			err = f.Start(ctx)
		}
		if err != nil {
			s.mu.Unlock()
			return nil, err
		}
		s.feed = f
		s.idle = time.AfterFunc(s.idleLimit(), a.idleIndex)
	}
	f := s.feed
	s.mu.Unlock()
	return f, nil
}

// idleIndex stops the feed when no listing used it for runIndexIdle.
func (a *API) idleIndex() {
	s := &a.index
	s.mu.Lock()
	if s.feed == nil || s.pinned {
		s.mu.Unlock()
		return
	}
	if rest := s.idleLimit() - time.Since(s.used); rest > 0 {
		s.idle.Reset(rest)
		s.mu.Unlock()
		return
	}
	f := s.feed
	s.feed, s.idle = nil, nil
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = f.Stop(ctx)
	a.log.Info("run index stopped: no listing for a while", "idle", s.idleLimit())
}

// stopIndex stops the run index for good (Service.Stop).
func (a *API) stopIndex(ctx context.Context) error {
	s := &a.index
	s.mu.Lock()
	f := s.feed
	s.feed, s.stopped = nil, true
	if s.idle != nil {
		s.idle.Stop()
		s.idle = nil
	}
	s.mu.Unlock()
	if f == nil {
		return nil
	}
	return f.Stop(ctx)
}

// ListRuns answers <p>.api.runs.list from the run index: a page of runs,
// newest first, and counts by status over every filter but the status.
func (a *API) ListRuns(ctx context.Context, req *bus.RunsListRequest) (*bus.RunsListReply, error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	if err := req.Validate(); err != nil {
		return nil, err
	}
	x, err := a.runIndex(ctx)
	if err != nil {
		return nil, err
	}
	q := runindex.Query{Agent: req.Agent, Session: req.Session, Worker: req.Worker, Parent: req.Parent, Schedule: req.Schedule,
		Since: req.Since, Until: req.Until, Awaiting: req.Awaiting, Limit: req.PageSize(), Cursor: req.Cursor}
	for _, s := range req.States() {
		q.Statuses = append(q.Statuses, store.RunStatus(s))
	}
	now := time.Now()
	page, err := x.Query(q, now)
	if errors.Is(err, runindex.ErrBadCursor) {
		return nil, invalid("cursor", "is not a cursor a listing returned: pass next_cursor as it came, or none for the first page")
	}
	if err != nil {
		return nil, err
	}
	a.fillCallInfo(ctx, x, page.Runs, now, 20)
	out := &bus.RunsListReply{Runs: make([]bus.RunSummary, 0, len(page.Runs)), NextCursor: page.Next, Counts: bus.RunCounts{
		Queued: page.Counts[store.RunQueued], Running: page.Counts[store.RunRunning], Parked: page.Counts[store.RunParked],
		Completed: page.Counts[store.RunCompleted], Failed: page.Counts[store.RunFailed],
	}}
	for _, r := range page.Runs {
		out.Runs = append(out.Runs, summaryOf(&r.Record, r.Awaiting))
	}
	if !page.Horizon.IsZero() {
		out.Horizon = &page.Horizon
	}
	return out, nil
}

// fillCallInfo looks up the tool (and ask_human's question) of up to max
// awaited calls the index does not know yet, from the runs' events, and
// caches them in the index.
func (a *API) fillCallInfo(ctx context.Context, x *runindex.Index, runs []runindex.Run, now time.Time, max int) {
	for i := range runs {
		aw := runs[i].Awaiting
		if aw == nil || aw.Tool != "" || max == 0 {
			continue
		}
		max--
		call, ok := a.approvalCall(ctx, runs[i].Record.RunID, aw.CallID)
		if !ok {
			continue
		}
		aw.Tool, aw.Question = call.Name, questionOf(call)
		x.SetCallInfo(runs[i].Record.RunID, aw.CallID, aw.Tool, aw.Question)
	}
}

// approvalCall finds the call of the run's approval_required event for
// callID: the run's last event (a run waiting on one call has published
// nothing since), else a read of its events.
func (a *API) approvalCall(ctx context.Context, runID, callID string) (*loop.ToolCall, bool) {
	last, err := a.pub.LastEvent(ctx, runID)
	if err != nil || last == nil {
		return nil, false
	}
	if c, ok := approvalOf(last.Envelope, callID); ok {
		return c, true
	}
	a.tailerOnce.Do(func() {
		a.tailer, a.tailerErr = bus.NewTailer(a.js, bus.TailerConfig{Prefix: a.names.Prefix()})
	})
	if a.tailerErr != nil {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	tail, err := a.tailer.Tail(ctx, runID, bus.FromStart())
	if err != nil {
		return nil, false
	}
	defer func() { _ = tail.Close(context.WithoutCancel(ctx)) }()
	for {
		env, err := tail.Next(ctx)
		if err != nil {
			return nil, false
		}
		if c, ok := approvalOf(env, callID); ok {
			return c, true
		}
		if env.Seq >= last.HighSeq {
			return nil, false
		}
	}
}

func approvalOf(env *bus.Envelope, callID string) (*loop.ToolCall, bool) {
	if env == nil || env.Type != loop.EventApprovalRequired {
		return nil, false
	}
	ev, err := env.Event()
	if err != nil {
		return nil, false
	}
	ar, ok := ev.(*loop.ApprovalRequired)
	if !ok || ar.Call.ID != callID {
		return nil, false
	}
	return &ar.Call, true
}

// questionOf is ask_human's question ("" for another tool).
func questionOf(c *loop.ToolCall) string {
	if c.Name != "ask_human" {
		return ""
	}
	var in struct {
		Question string `json:"question"`
	}
	_ = json.Unmarshal([]byte(c.Arguments), &in)
	return in.Question
}

// summaryOf is a run's listing entry.
func summaryOf(r *store.RunRecord, aw *runindex.Await) bus.RunSummary {
	s := bus.RunSummary{RunID: r.RunID, Agent: r.Agent, FinalAgent: r.FinalAgent, SessionID: r.SessionID, Status: bus.RunState(r.Status),
		Worker: r.Worker, Attempt: r.Attempt, Turns: r.Turns, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, ParentRunID: r.ParentRunID, Error: r.Error}
	if aw != nil {
		s.Awaiting = &bus.RunAwaiting{Kind: bus.AwaitApproval, CallID: aw.CallID, Tool: aw.Tool, Question: aw.Question, Deadline: aw.Deadline, Parked: aw.Parked}
		if aw.Tool == "ask_human" {
			s.Awaiting.Kind = bus.AwaitQuestion
		}
	}
	return s
}

// DescribeRun answers <p>.api.run.<id>.describe: the run's record with
// its history, what it awaits, its timing and its children.
func (a *API) DescribeRun(ctx context.Context, runID string) (*bus.RunDescription, error) {
	if err := bus.ValidateID("run_id", runID); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	r, err := a.record(ctx, runID)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	d := &bus.RunDescription{Usage: r.Usage, FinishReason: r.FinishReason, Submissions: max(r.Submissions, 1), Wakes: r.Wakes,
		Attempts: make([]bus.RunStep, 0, len(r.Attempts)), AttemptsDropped: r.AttemptsDropped, Children: []bus.RunSummary{},
		RegistryRevision: r.Registry, Version: r.Version, Metadata: r.Metadata}
	for _, s := range r.Attempts {
		d.Attempts = append(d.Attempts, bus.RunStep{N: s.N, Kind: s.Kind, Attempt: s.Attempt, Worker: s.Worker, Version: s.Version, At: s.At})
	}
	if r.Status == store.RunCompleted {
		d.Result = storedResult(&r)
	}
	if !r.StartedAt.IsZero() {
		end := r.FinishedAt
		if end.IsZero() {
			end = now
		}
		d.DurationMS = max(end.Sub(r.StartedAt).Milliseconds(), 0)
	}
	var aw *runindex.Await
	if r.Status == store.RunParked && r.Parked != nil {
		aw = &runindex.Await{CallID: r.Parked.CallID, Deadline: r.Parked.Deadline, Parked: true}
	}
	x, ierr := a.runIndex(ctx)
	if ierr == nil {
		if aw == nil && r.Status == store.RunRunning {
			if ir, ok := x.Get(runID, now); ok && ir.Awaiting != nil {
				aw = ir.Awaiting
			}
		}
		kids, err := x.Query(runindex.Query{Parent: runID, Limit: bus.MaxListLimit}, now)
		if err == nil {
			for _, k := range kids.Runs {
				d.Children = append(d.Children, summaryOf(&k.Record, k.Awaiting))
			}
		}
	} else {
		a.log.Warn("describe: the run index is not available; the description has no children and no pending approval of a running run", "run_id", runID, "error", ierr)
	}
	if aw != nil && aw.Tool == "" {
		if call, ok := a.approvalCall(ctx, runID, aw.CallID); ok {
			aw.Tool, aw.Question = call.Name, questionOf(call)
			if x != nil {
				x.SetCallInfo(runID, aw.CallID, aw.Tool, aw.Question)
			}
		}
	}
	d.RunSummary = summaryOf(&r, aw)
	if r.Status == store.RunQueued {
		d.Waiting = a.waiting(ctx, r.Agent)
	}
	return d, nil
}

// runsEndpoints are the listing's endpoints: <p>.api.runs.list and
// <p>.api.run.*.describe.
func (s *Service) runsEndpoints(add func(name, subject string, h func(context.Context, micro.Request) (any, error)) error) []error {
	n := s.api.names
	return []error{
		add("runs_list", n.RunsList(), func(ctx context.Context, r micro.Request) (any, error) {
			req, err := bus.DecodeRunsList(headers(r), r.Data())
			if err != nil {
				return nil, err
			}
			return s.api.ListRuns(ctx, req)
		}),
		add("describe", n.RunAPIWildcard(bus.OpDescribe), func(ctx context.Context, r micro.Request) (any, error) {
			return s.api.DescribeRun(ctx, token(r.Subject(), 1))
		}),
	}
}
