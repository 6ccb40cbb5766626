package compaction_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/compaction"
)

// session simulates a long agentic run against one policy: each step
// appends a tool turn (and now and then a remark and a user message),
// compacts with the carried state and reports the provider's count as
// 1.1 × the raw estimate, as a real endpoint would.
type session struct {
	t      testing.TB
	c      *compaction.Compaction
	p      loop.Provider
	es     []loop.Entry
	state  map[string]any
	last   int64
	step   int
	views  [][]byte // encoded views (hashes when hashOnly)
	result []*loop.CompactResult
	// hashOnly keeps a digest of each view instead of its bytes.
	hashOnly bool
}

func newSession(t testing.TB, c *compaction.Compaction) *session {
	return &session{t: t, c: c, p: newProvider(), es: []loop.Entry{sys("You are a test agent."), user("Go.")}, state: map[string]any{}}
}

func (s *session) grow() {
	i := s.step
	s.step++
	id := fmt.Sprintf("c%d", i)
	n := 400 + (i*997)%5600 // 400..6000 chars
	s.es = append(s.es, call(id), res(id, payload(id, n)))
	if i%7 == 6 {
		s.es = append(s.es, text(payload("a"+id, 300)), user(payload("u"+id, 120)))
	}
}

func (s *session) compact() *loop.CompactResult {
	req := &loop.CompactRequest{Entries: s.es, Provider: s.p, Model: "m1", State: s.state, LastInputTokens: s.last}
	r := compact(s.t, s.c, req)
	if v, ok := s.state[compaction.StateKey].(map[string]any)["last_view_estimate"].(int); ok {
		s.last = int64(float64(v) * 1.1)
	}
	if s.hashOnly {
		s.views = append(s.views, viewHash(r.Entries))
	} else {
		s.views = append(s.views, viewBytes(s.t, r.Entries))
	}
	s.result = append(s.result, r)
	return r
}

func TestPipeline(t *testing.T) {
	t.Parallel()

	t.Run("HysteresisAndCacheStability", func(t *testing.T) {
		t.Parallel()
		sum := &fakeSummarizer{}
		s := newSession(t, compaction.New(compaction.Config{ContextWindow: 30000, ReserveOutputTokens: 2000, Summarizer: sum}))
		compactions := 0
		for range 300 {
			s.grow()
			r := s.compact()
			k := len(s.views) - 1
			if r.Compacted {
				compactions++
				require.LessOrEqual(t, r.TokensAfter, int(0.60*28000)+1, "step %d: compaction reaches the target", k)
				continue
			}
			if k > 0 {
				require.True(t, bytes.HasPrefix(s.views[k], s.views[k-1]),
					"step %d: without a new decision the previous view is a byte prefix of this one", k)
			}
			require.Less(t, r.Estimate, int(0.85*28000), "step %d: below the trigger between compactions", k)
		}
		require.GreaterOrEqual(t, compactions, 5)
		require.Less(t, compactions, 60, "hysteresis: compactions are rare")
		require.Positive(t, sum.n(), "long runs end up summarized")
		for k, r := range s.result {
			if r.Compacted && k+1 < len(s.views) && !s.result[k+1].Compacted {
				require.True(t, bytes.HasPrefix(s.views[k+1], s.views[k]), "turn %d's view is a prefix of the next after a compaction", k)
			}
		}
	})

	t.Run("TranscriptUntouched", func(t *testing.T) {
		t.Parallel()
		es := chatty(40)
		es[3].Raw = []byte(`{"big":true}`)
		orig := deepCopy(es)
		req := request(newProvider(), es)
		r := compact(t, allStages(&fakeSummarizer{}), req)
		require.True(t, r.Compacted)
		require.Equal(t, orig, es)
		require.Equal(t, orig, req.Entries)
	})

	t.Run("ViewIsAPureFunctionOfTranscriptAndState", func(t *testing.T) {
		t.Parallel()
		es := chatty(40)
		req := request(newProvider(), es)
		r := compact(t, allStages(&fakeSummarizer{}), req)
		// Another policy instance (another worker) with the same state.
		again := request(newProvider(), es)
		again.State = jsonRoundTrip(t, req.State)
		r2 := compact(t, allStages(&fakeSummarizer{fail: 100}), again)
		require.Equal(t, viewBytes(t, r.Entries), viewBytes(t, r2.Entries))
		require.False(t, r2.Compacted)
	})

	t.Run("SystemHeadIsKept", func(t *testing.T) {
		t.Parallel()
		es := append([]loop.Entry{sys("one"), sys("two")}, chatty(40)[1:]...)
		r := compact(t, allStages(&fakeSummarizer{}), request(newProvider(), es))
		require.Equal(t, es[:2], r.Entries[:2])
		require.Equal(t, loop.RoleUser, r.Entries[2].Role, "the summary follows the system head as a user entry")
		require.Contains(t, r.Entries[2].Content, "<context_summary>")
	})

	t.Run("ProtectedTailNeverSplitsACallFromItsResult", func(t *testing.T) {
		t.Parallel()
		big := payload("x", 2000) // 508 tokens
		es := []loop.Entry{user("start"), call("c0"), res("c0", big), text("hmm"), user("look at a and b"),
			loop.ToolCallEntry("a", "f", "{}"), loop.ToolCallEntry("b", "f", "{}"), res("a", big), res("b", big)}
		rec := &recorder{}
		// Tail of 600 tokens: the walk stops inside the batch (after res b).
		c := compaction.New(compaction.Config{ContextWindow: 1500, ReserveOutputTokens: compaction.None,
			KeepRecentTokens: 600, Stages: []compaction.Stage{rec}})
		compact(t, c, request(newProvider(), es))
		require.Equal(t, 4, rec.protected, "pulled back to the user message before the batch")

		// Without the user message nearby the cut moves to the first call.
		es[4] = text("looking")
		compact(t, c, request(newProvider(), es))
		require.Equal(t, 5, rec.protected, "moved left to call a")

		// The newest entry is always protected.
		c = compaction.New(compaction.Config{ContextWindow: 600, ReserveOutputTokens: compaction.None,
			KeepRecentTokens: 1, Stages: []compaction.Stage{rec}})
		compact(t, c, request(newProvider(), es[:3]))
		require.Equal(t, 1, rec.protected, "the newest result comes with its call")
	})

	t.Run("StageErrorKeepsDecisions", func(t *testing.T) {
		t.Parallel()
		es := chatty(10)
		c := compaction.New(compaction.Config{ContextWindow: 3000, ReserveOutputTokens: compaction.None,
			Stages: []compaction.Stage{failing{}}})
		req := request(newProvider(), es)
		_, err := c.Compact(context.Background(), req)
		require.ErrorIs(t, err, errStage)
		require.ErrorContains(t, err, "stage failing")
		require.Equal(t, []any{"c0"}, stateOf(t, req)["cleared"], "the oldest result")
	})
}

// recorder is a custom stage that records what it saw and decides nothing.
type recorder struct{ protected int }

func (*recorder) Name() string { return "recorder" }
func (r *recorder) Plan(_ context.Context, pc *compaction.PlanContext) (bool, error) {
	r.protected = pc.Protected()
	return false, nil
}

var errStage = errors.New("stage broke")

// failing clears the oldest candidate, then fails.
type failing struct{}

func (failing) Name() string { return "failing" }
func (failing) Plan(_ context.Context, pc *compaction.PlanContext) (bool, error) {
	for _, i := range pc.Candidates() {
		if pc.Clear(i) {
			return true, errStage
		}
	}
	return false, errStage
}

// viewHash digests a view's fields cheaply.
func viewHash(es []loop.Entry) []byte {
	h := sha256.New()
	for i := range es {
		e := &es[i]
		for _, f := range []string{string(e.Kind), string(e.Role), e.Content, e.Text, e.CallID, e.Name, e.Arguments, e.Output} {
			h.Write([]byte(f))
			h.Write([]byte{0})
		}
		if e.IsError {
			h.Write([]byte{1})
		}
		h.Write(e.Raw)
		h.Write([]byte{0xff})
	}
	return h.Sum(nil)
}

func deepCopy(es []loop.Entry) []loop.Entry {
	out := make([]loop.Entry, len(es))
	for i, e := range es {
		e.Raw = append([]byte(nil), e.Raw...)
		if e.Raw != nil && len(e.Raw) == 0 {
			e.Raw = nil
		}
		e.Parts = append([]loop.Part(nil), e.Parts...)
		out[i] = e
	}
	return out
}

func TestEdgeCases(t *testing.T) {
	t.Parallel()
	c := compaction.New(compaction.Config{ContextWindow: 1024, ReserveOutputTokens: compaction.None})
	for name, es := range map[string][]loop.Entry{
		"empty":       nil,
		"system only": {sys(payload("s", 8000))},
		"one user":    {user(payload("u", 8000))},
		"dangling":    {user("go"), call("c1"), call("c2"), res("c2", payload("r", 8000))},
		"orphan":      {user("go"), res("ghost", payload("g", 8000)), text("hm")},
	} {
		req := request(newProvider(), es)
		r := compact(t, c, req)
		require.Len(t, r.Entries, len(es), name)
		req.Overflow, req.ReportedWindow = true, 2048
		_ = compact(t, c, req)
	}
	// A nil state map is tolerated (nothing is carried).
	r, err := c.Compact(context.Background(), &loop.CompactRequest{Entries: []loop.Entry{user("x")}})
	require.NoError(t, err)
	require.False(t, r.Changed)
}
