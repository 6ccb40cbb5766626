package subagents

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Tool names.
const (
	SpawnTool  = "spawn_subagent"
	WaitTool   = "wait_subagents"
	SendTool   = "send_to_subagent"
	CancelTool = "cancel_subagent"
)

// Metadata keys of a child's run request.
const (
	MetaParentRunID = bus.MetaParentRunID
	MetaParentAgent = "parent_agent"
)

// Fleet is the part of the fleet API the plugin uses; *client.Client
// implements it.
type Fleet interface {
	Submit(ctx context.Context, req *bus.RunRequest) (*bus.SubmitReply, error)
	Inject(ctx context.Context, runID, content string, opts ...bus.InjectOption) (string, error)
	Cancel(ctx context.Context, runID, reason string) (*bus.CancelReply, error)
	Tail(ctx context.Context, runID string, opts ...bus.TailOption) (*bus.Tail, error)
}

// Config configures the plugin.
type Config struct {
	// Fleet submits, steers and watches the children (required).
	Fleet Fleet
	// Agents are the agents a child may run (required).
	Agents []string
	// MaxWait caps wait_subagents (default 10 minutes).
	MaxWait time.Duration
	// Logger logs failed deliveries (default slog.Default()).
	Logger *slog.Logger
}

// Plugin is the Subagents plugin. One value serves every run; it tracks
// the children it watches per parent run.
type Plugin struct {
	cfg   Config
	tools []*loop.Tool

	mu      sync.Mutex
	parents map[string]*parent // by parent run id
	// released are parents no longer watched whose watchers may still be
	// running; the next Close (or Stop) waits for them.
	released []*parent
	wg       sync.WaitGroup
}

// parent is what this process watches for one parent run.
type parent struct {
	ctx      context.Context
	cancel   context.CancelFunc
	children map[string]*child
	// run is the run's context (from Setup; nil for a parent watched
	// outside the loop): once it is done, the run has ended here.
	run context.Context
	wg  sync.WaitGroup // the watchers
}

// closeWait bounds how long Close waits for stopped watchers.
const closeWait = 10 * time.Second

type child struct {
	done chan struct{} // closed once the report is delivered (or given up)
}

// Spawned is the raw result of spawn_subagent, the tool_call_completed
// event's result on the wire ({run_id, agent, events_subject}), so a UI
// can draw the run tree from the parent's events; the model sees
// [Spawned.String].
type Spawned struct {
	RunID         string `json:"run_id" msgpack:"run_id"`
	Agent         string `json:"agent" msgpack:"agent"`
	EventsSubject string `json:"events_subject,omitempty" msgpack:"events_subject,omitempty"`
}

// String is the text the model receives.
func (s Spawned) String() string {
	return fmt.Sprintf("Subagent %s (agent %s) started. Its report will arrive as a message when it ends; continue meanwhile, or call wait_subagents.", s.RunID, s.Agent)
}

type spawnArgs struct {
	Agent string `json:"agent" desc:"The agent to run as the subagent."`
	Task  string `json:"task" desc:"The subagent's task: everything it needs to know, self-contained." jsonschema:"minLength=1"`
}

type waitArgs struct {
	RunIDs []string `json:"run_ids,omitempty" desc:"The subagents to wait for (default: every one this run started)."`
}

type sendArgs struct {
	RunID   string `json:"run_id" desc:"The subagent's run id."`
	Message string `json:"message" desc:"The message for its next turn." jsonschema:"minLength=1"`
}

type cancelArgs struct {
	RunID string `json:"run_id" desc:"The subagent's run id."`
}

// New returns the plugin.
func New(cfg Config) (*Plugin, error) {
	if cfg.Fleet == nil {
		return nil, errors.New("subagents: Config.Fleet is required (a client.Client of the fleet)")
	}
	if len(cfg.Agents) == 0 {
		return nil, errors.New("subagents: Config.Agents must name the agents a subagent may run")
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 10 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p := &Plugin{cfg: cfg, parents: map[string]*parent{}}
	p.tools = []*loop.Tool{
		loop.NewTool(SpawnTool, "Start a subagent in the background on a task. Returns its run id at once; its report arrives later as a message.", p.spawn,
			loop.WithRenderer(func(v any) (string, error) {
				s, ok := v.(Spawned)
				if !ok {
					return "", fmt.Errorf("spawn_subagent: unexpected result %T", v)
				}
				return s.String(), nil
			})),
		loop.NewTool(WaitTool, "Wait until subagents have ended; their reports then arrive as messages.", p.wait, loop.Sequential()),
		loop.NewTool(SendTool, "Send a message to a running subagent.", p.send),
		loop.NewTool(CancelTool, "Cancel a subagent.", p.cancelChild),
	}
	return p, nil
}

// Name implements loop.Plugin.
func (p *Plugin) Name() string { return "subagents" }

// Tools implements loop.PluginTools.
func (p *Plugin) Tools() []*loop.Tool { return p.tools }

// Setup implements loop.PluginSetup: when the run ends here — completed,
// failed, or released by a stopping worker — this process stops watching
// its children (the worker that resumes it watches them instead).
func (p *Plugin) Setup(ctx context.Context, rc *loop.RunContext) error {
	if rc.RunID != "" {
		id := rc.RunID
		p.mu.Lock()
		p.parent(id).run = ctx
		p.mu.Unlock()
		context.AfterFunc(ctx, func() { p.release(id) })
	}
	return nil
}

// Close implements loop.PluginCloser, at the end of a run here: it stops
// the watchers of every run whose context has ended — a run interrupted
// by a stopping worker, or cancelled — and waits (at most 10 seconds) for
// them and for those of runs released earlier. A worker's Stop waits for
// its runs, so no watcher of a run it interrupted outlives it. A run that
// completed or failed here (its context ends just after Close) has its
// watchers stopped by Setup's hook; the next Close, or Stop, waits for
// them.
func (p *Plugin) Close(ctx context.Context) error {
	p.mu.Lock()
	for id, pr := range p.parents {
		if pr.run != nil && pr.run.Err() != nil {
			delete(p.parents, id)
			pr.cancel()
			p.released = append(p.released, pr)
		}
	}
	p.mu.Unlock()
	return p.awaitReleased(ctx, closeWait)
}

// awaitReleased waits for the watchers of the released parents.
func (p *Plugin) awaitReleased(ctx context.Context, limit time.Duration) error {
	p.mu.Lock()
	prs := p.released
	p.released = nil
	p.mu.Unlock()
	if len(prs) == 0 {
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, pr := range prs {
			pr.wg.Wait()
		}
	}()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-done:
		return nil
	case <-timer.C:
		return fmt.Errorf("subagents: watchers still stopping after %s (a child's tail did not close); they end by themselves", limit)
	case <-ctx.Done():
		return fmt.Errorf("subagents: waiting for watchers to stop: %w", context.Cause(ctx))
	}
}

// parent returns the watch state of a parent run, creating it; p.mu held.
func (p *Plugin) parent(runID string) *parent {
	pr := p.parents[runID]
	if pr == nil {
		ctx, cancel := context.WithCancel(context.Background())
		pr = &parent{ctx: ctx, cancel: cancel, children: map[string]*child{}}
		p.parents[runID] = pr
	}
	return pr
}

// Instructions implements loop.PluginInstructions.
func (p *Plugin) Instructions(context.Context, *loop.RunContext) string {
	return "You can delegate work to subagents (" + strings.Join(p.cfg.Agents, ", ") + ") with spawn_subagent; they run in the background. Their reports arrive as <subagent_report> messages; call wait_subagents when you need them before going on."
}

// Stop stops every watcher and waits for them (for a process shutting
// down; the parents' next workers take over). The plugin may serve runs
// again afterwards: a later watch starts afresh.
func (p *Plugin) Stop() {
	p.mu.Lock()
	for id, pr := range p.parents {
		delete(p.parents, id)
		pr.cancel()
	}
	p.released = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// InjectView implements loop.PluginViewInjector. It adds no entries: it
// makes sure this process watches the run's children whose reports the
// transcript lacks (after a resume on this worker).
func (p *Plugin) InjectView(_ context.Context, rc *loop.RunContext) []loop.Entry {
	if rc.RunID == "" {
		return nil
	}
	entries := rc.Entries()
	for _, id := range Children(entries) {
		if !reported(entries, id) {
			p.watch(rc, id)
		}
	}
	return nil
}

var spawnedRE = regexp.MustCompile(`^Subagent (\S+) `)

// Children lists the child run ids a transcript's spawn_subagent results
// name, in order.
func Children(entries []loop.Entry) []string {
	var out []string
	for _, e := range entries {
		if e.Kind == loop.KindToolResult && e.Name == SpawnTool && !e.IsError {
			if m := spawnedRE.FindStringSubmatch(e.Output); m != nil {
				out = append(out, m[1])
			}
		}
	}
	return out
}

func reported(entries []loop.Entry, childID string) bool {
	marker := reportMarker(childID)
	for _, e := range entries {
		if e.Kind == loop.KindInput && strings.HasPrefix(e.ContentText(), marker) {
			return true
		}
	}
	return false
}

func reportMarker(childID string) string { return fmt.Sprintf("<subagent_report run_id=%q", childID) }

func (p *Plugin) spawn(ctx context.Context, rc *loop.RunContext, in spawnArgs) (Spawned, error) {
	if !slices.Contains(p.cfg.Agents, in.Agent) {
		return Spawned{}, &loop.ToolError{Message: fmt.Sprintf("agent %q cannot run as a subagent here (allowed: %s)", in.Agent, strings.Join(p.cfg.Agents, ", "))}
	}
	if rc.RunID == "" {
		return Spawned{}, &loop.ToolError{Message: "subagents need a parent run with a run id (a fleet run)"}
	}
	meta := map[string]any{MetaParentRunID: rc.RunID}
	if a := rc.Agent(); a != nil {
		meta[MetaParentAgent] = a.Name
	}
	req := &bus.RunRequest{Agent: in.Agent, Input: bus.TextInput(in.Task), Metadata: meta}
	if call, ok := loop.ToolCallFrom(ctx); ok && call.ID != "" {
		req.RunID = ChildRunID(rc.RunID, call.ID)
	}
	rep, err := p.cfg.Fleet.Submit(ctx, req)
	if err != nil {
		return Spawned{}, fmt.Errorf("starting subagent %s: %w", in.Agent, err)
	}
	p.watch(rc, rep.RunID)
	return Spawned{RunID: rep.RunID, Agent: in.Agent, EventsSubject: rep.EventsSubject}, nil
}

// ChildRunID is the run id of the child the spawn_subagent call callID of
// run parentID starts. A call the parent runs again after a crash (its
// result was not checkpointed) submits the same run id, which the fleet
// deduplicates: the parent never gets two children for one call.
func ChildRunID(parentID, callID string) string {
	sum := sha256.Sum256([]byte(parentID + "\x00" + callID))
	return "sub-" + hex.EncodeToString(sum[:12])
}

// watch starts the watcher of childID for rc's run, once per process.
func (p *Plugin) watch(rc *loop.RunContext, childID string) *child {
	p.mu.Lock()
	defer p.mu.Unlock()
	pr := p.parent(rc.RunID)
	if c := pr.children[childID]; c != nil {
		return c
	}
	c := &child{done: make(chan struct{})}
	pr.children[childID] = c
	p.wg.Add(1)
	pr.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer pr.wg.Done()
		defer close(c.done)
		p.deliver(pr.ctx, rc.RunID, childID)
	}()
	return c
}

// deliver tails the child to its terminal event and injects the report
// into the parent's mailbox.
func (p *Plugin) deliver(ctx context.Context, parentID, childID string) {
	tail, err := p.cfg.Fleet.Tail(ctx, childID, bus.FromStart())
	if err != nil {
		if ctx.Err() == nil {
			p.cfg.Logger.Warn("subagent not watched", "parent", parentID, "child", childID, "error", err)
		}
		return
	}
	defer tail.Close(context.WithoutCancel(ctx))
	var report string
	for env, err := range tail.All(ctx) {
		if err != nil {
			if ctx.Err() == nil {
				p.cfg.Logger.Warn("subagent watch ended", "parent", parentID, "child", childID, "error", err)
			}
			return
		}
		if env.IsTerminal() {
			report = Report(childID, env)
			break
		}
	}
	if report == "" {
		return
	}
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := p.cfg.Fleet.Inject(ictx, parentID, report, bus.InjectKey(ReportKey(childID))); err != nil && ctx.Err() == nil {
		p.cfg.Logger.Warn("subagent report not delivered", "parent", parentID, "child", childID, "error", err)
	}
}

// ReportKey is the idempotency key a child's report is injected with,
// "subagent:<child_run_id>": however many watchers deliver it — the dead
// worker's and its successor's, or one run again — the parent's mailbox
// stores it once, and a report the parent already folded in is not
// queued again.
func ReportKey(childID string) string { return "subagent:" + childID }

// Report renders a child's terminal event as the message its parent gets.
func Report(childID string, env *bus.Envelope) string {
	status, body := "completed", ""
	ev, err := env.Event()
	switch e := ev.(type) {
	case *loop.RunCompleted:
		body = fmt.Sprint(e.Output)
		if s, ok := e.Output.(string); ok {
			body = s
		}
	case *loop.RunFailed:
		status, body = "failed", e.Error.Message
	default:
		status, body = "failed", fmt.Sprintf("unreadable terminal event: %v", err)
	}
	return fmt.Sprintf("%s agent=%q status=%q>\n%s\n</subagent_report>", reportMarker(childID), env.Agent, status, body)
}

// own returns the run's children, checking that ids are among them.
func (p *Plugin) own(rc *loop.RunContext, ids []string) ([]string, error) {
	kids := Children(rc.Entries())
	if len(ids) == 0 {
		return kids, nil
	}
	for _, id := range ids {
		if !slices.Contains(kids, id) && len(kids) == 0 {
			return nil, &loop.ToolError{Message: fmt.Sprintf("%s is not a subagent of this run: this run has started no subagents: call spawn_subagent first", id)}
		}
		if !slices.Contains(kids, id) {
			return nil, &loop.ToolError{Message: fmt.Sprintf("%s is not a subagent of this run (its subagents: %s)", id, strings.Join(kids, ", "))}
		}
	}
	return ids, nil
}

func (p *Plugin) wait(ctx context.Context, rc *loop.RunContext, in waitArgs) (string, error) {
	ids, err := p.own(rc, in.RunIDs)
	if err != nil {
		return "", err
	}
	if len(ids) == 0 {
		return "", &loop.ToolError{Message: "this run has started no subagents: call spawn_subagent first"}
	}
	entries := rc.Entries()
	timer := time.NewTimer(p.cfg.MaxWait)
	defer timer.Stop()
	var (
		pending  []string
		timedOut bool
	)
	for _, id := range ids {
		if reported(entries, id) {
			continue
		}
		c := p.watch(rc, id)
		if timedOut {
			select {
			case <-c.done:
			default:
				pending = append(pending, id)
			}
			continue
		}
		select {
		case <-c.done:
		case <-timer.C:
			timedOut = true
			pending = append(pending, id)
		case <-ctx.Done():
			// The run is cancelled or its worker stops: the call stays
			// open and runs again where the run resumes.
			return "", ctx.Err()
		}
	}
	if len(pending) > 0 {
		return fmt.Sprintf("Still running after %s: %s. Their reports will arrive as messages.", p.cfg.MaxWait, strings.Join(pending, ", ")), nil
	}
	return fmt.Sprintf("%d subagent(s) ended; their reports follow as messages.", len(ids)), nil
}

func (p *Plugin) send(ctx context.Context, rc *loop.RunContext, in sendArgs) (string, error) {
	if _, err := p.own(rc, []string{in.RunID}); err != nil {
		return "", err
	}
	if _, err := p.cfg.Fleet.Inject(ctx, in.RunID, in.Message); err != nil {
		return "", &loop.ToolError{Message: fmt.Sprintf("message not delivered to %s: %v", in.RunID, err), Cause: err}
	}
	return "Sent to " + in.RunID + ".", nil
}

func (p *Plugin) cancelChild(ctx context.Context, rc *loop.RunContext, in cancelArgs) (string, error) {
	if _, err := p.own(rc, []string{in.RunID}); err != nil {
		return "", err
	}
	if _, err := p.cfg.Fleet.Cancel(ctx, in.RunID, "cancelled by its parent "+rc.RunID); err != nil {
		return "", &loop.ToolError{Message: fmt.Sprintf("cancel of %s failed: %v", in.RunID, err), Cause: err}
	}
	return "Cancelled " + in.RunID + "; its report will say so.", nil
}

// release stops this process's watchers of a parent run.
func (p *Plugin) release(parentID string) {
	p.mu.Lock()
	pr := p.parents[parentID]
	delete(p.parents, parentID)
	if pr != nil {
		p.released = append(p.released, pr)
	}
	p.mu.Unlock()
	if pr != nil {
		pr.cancel()
	}
}
