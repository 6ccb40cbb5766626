package loop_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

var errCrash = errors.New("simulated crash")

// crashingCheckpointer lets the first `allow` appends through and fails
// every later write, as if the process died right after append #allow.
type crashingCheckpointer struct {
	loop.Checkpointer
	mu    sync.Mutex
	allow int
	n     int
}

func (c *crashingCheckpointer) Append(ctx context.Context, runID string, w loop.CheckpointWrite) (uint64, error) {
	c.mu.Lock()
	c.n++
	crashed := c.n > c.allow
	c.mu.Unlock()
	if crashed {
		return 0, errCrash
	}
	return c.Checkpointer.Append(ctx, runID, w)
}

func (c *crashingCheckpointer) Delete(ctx context.Context, runID string) error {
	c.mu.Lock()
	crashed := c.n >= c.allow
	c.mu.Unlock()
	if crashed {
		return errCrash
	}
	return c.Checkpointer.Delete(ctx, runID)
}

// failingSession fails its first Append.
type failingSession struct {
	loop.Session
	mu     sync.Mutex
	failed bool
}

func (s *failingSession) Append(ctx context.Context, id string, seg loop.Segment) (string, error) {
	s.mu.Lock()
	first := !s.failed
	s.failed = true
	s.mu.Unlock()
	if first {
		return "", errCrash
	}
	return s.Session.Append(ctx, id, seg)
}

// crashFixture builds a fresh agent (as a new process would) whose two
// barrier tools count their executions per call id.
type crashFixture struct {
	mu    sync.Mutex
	count map[string]int
}

func (f *crashFixture) agent() *loop.Agent {
	tool := func(name string) *loop.Tool {
		return loop.NewTool(name, name, func(_ context.Context, rc *loop.RunContext, _ empty) (string, error) {
			f.mu.Lock()
			f.count[name]++
			f.mu.Unlock()
			return name + " result", nil
		}, loop.Sequential())
	}
	p := scripted.New([]scripted.Step{
		scripted.Batch(scripted.Call{ID: "c1", Name: "t1"}, scripted.Call{ID: "c2", Name: "t2"}),
		scripted.Text("done"),
	})
	return &loop.Agent{Name: "worker", Provider: p, Tools: []*loop.Tool{tool("t1"), tool("t2")}}
}

func (f *crashFixture) snapshotCounts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for k, v := range f.count {
		out[k] = v
	}
	return out
}

// TestCrashAtEveryCheckpointPoint stops a run right after each checkpoint
// append of LOVIA-SEMANTICS §4.2 (after the model turn, after each tool
// result, at turn ends, at completion) and between completion and the
// session append, then resumes it with a fresh Runner and agent from the
// stored snapshot. No checkpointed call runs again, every dangling call runs
// exactly once, and the result equals an uninterrupted run's.
func TestCrashAtEveryCheckpointPoint(t *testing.T) {
	ctx := context.Background()
	input := []loop.Entry{loop.UserText("do both")}

	// The uninterrupted reference run.
	ref := &crashFixture{count: map[string]int{}}
	refRes, err := loop.NewRunner(loop.RunnerConfig{}).Run(ctx, ref.agent(), input,
		loop.WithCheckpoint(loop.NewMemoryCheckpointer(), "ref"), loop.WithSession(loop.NewMemorySession(), "s"))
	require.NoError(t, err)
	require.Equal(t, map[string]int{"t1": 1, "t2": 1}, ref.snapshotCounts())

	// Appends of the reference run: 1 post-model, 2 c1 result, 3 c2 result,
	// 4 completed with the final message of turn 2 (a turn's end that
	// changes nothing writes nothing).
	for allow := 0; allow <= 4; allow++ {
		t.Run(fmt.Sprintf("after_append_%d", allow), func(t *testing.T) {
			t.Parallel()
			store := loop.NewMemoryCheckpointer()
			sess := loop.NewMemorySession()
			f := &crashFixture{count: map[string]int{}}
			var session loop.Session = sess
			if allow == 4 {
				// Crash between checkpoint completion and the session append.
				session = &failingSession{Session: sess}
			}
			_, err := loop.NewRunner(loop.RunnerConfig{}).Run(ctx, f.agent(), input,
				loop.WithCheckpoint(&crashingCheckpointer{Checkpointer: store, allow: allow}, "r1"),
				loop.WithSession(session, "s"))
			require.ErrorIs(t, err, errCrash)
			first := f.snapshotCounts()
			for tool, n := range first {
				require.LessOrEqual(t, n, 1, "%s ran more than once before the crash", tool)
			}

			// What the crashed process left behind.
			answered := map[string]bool{}
			if snap, err := store.Load(ctx, "r1"); err == nil {
				for _, e := range snap.Entries {
					if e.Kind == loop.KindToolResult {
						answered[e.Name] = true
					}
				}
			} else {
				require.ErrorIs(t, err, loop.ErrNoSnapshot)
			}

			// A new process resumes it.
			f2 := &crashFixture{count: map[string]int{}}
			res, err := loop.NewRunner(loop.RunnerConfig{}).Run(ctx, f2.agent(), input,
				loop.WithCheckpoint(store, "r1"), loop.WithSession(sess, "s"))
			require.NoError(t, err)
			second := f2.snapshotCounts()
			for _, tool := range []string{"t1", "t2"} {
				if answered[tool] {
					require.Zero(t, second[tool], "%s was checkpointed and must not run again", tool)
				} else {
					require.Equal(t, 1, second[tool], "%s was dangling (or never ran) and must run exactly once on resume", tool)
				}
			}
			require.Equal(t, refRes.Output, res.Output)
			require.Equal(t, entrySigs(refRes.Entries), entrySigs(res.Entries))
			require.Equal(t, refRes.Turns, res.Turns)
			flat, err := loop.LoadSession(ctx, sess, "s")
			require.NoError(t, err)
			require.Equal(t, entrySigs(refRes.Entries), entrySigs(flat), "the session holds the run exactly once")
		})
	}
}
