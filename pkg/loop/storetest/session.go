package storetest

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// NewSession returns a fresh, empty session store for one subtest.
type NewSession func(t *testing.T) loop.Session

// RunSession runs the [loop.Session] conformance suite, including the
// Rewind and TrimToolResults cases of lovia's session contract.
func RunSession(t *testing.T, newStore NewSession) {
	t.Helper()
	type bundle struct {
		s   loop.Session
		sid string
	}
	setup := func(t *testing.T) bundle {
		t.Helper()
		t.Parallel()
		return bundle{s: newStore(t), sid: newID("sess")}
	}
	appendSeg := func(t *testing.T, b bundle, seg loop.Segment) string {
		t.Helper()
		id, err := b.s.Append(testContext(t), b.sid, seg)
		require.NoError(t, err)
		if seg.RunID != "" {
			require.Equal(t, seg.RunID, id)
		}
		return id
	}
	segments := func(t *testing.T, b bundle) []loop.Segment {
		t.Helper()
		segs, err := b.s.Segments(testContext(t), b.sid)
		require.NoError(t, err)
		require.NotNil(t, segs, "Segments returns an empty slice, not nil")
		return segs
	}
	// three appends three segments of 2, 4 and 3 entries, with meta, and
	// returns them.
	three := func(t *testing.T, b bundle) []loop.Segment {
		t.Helper()
		segs := []loop.Segment{
			{RunID: "run-c", Entries: []loop.Entry{loop.UserText("I'm Mei"), loop.AssistantText("hi")}, Meta: map[string]any{"context_state": map[string]any{"n": 1}}},
			{RunID: "run-a", Entries: append([]loop.Entry{loop.UserText("look it up")}, turn(1)...), Meta: map[string]any{"context_state": map[string]any{"n": 2}}},
			{RunID: "run-b", Entries: []loop.Entry{loop.UserText("my name?"), loop.ToolCallEntry("c9", "whoami", "{}"), loop.ToolResultEntry("c9", "whoami", "Mei", false)}, Meta: map[string]any{"context_notice": "x"}},
		}
		for _, seg := range segs {
			appendSeg(t, b, seg)
		}
		return segs
	}
	rewind := func(t *testing.T, b bundle, keep int) int {
		t.Helper()
		removed, err := b.s.Rewind(testContext(t), b.sid, keep)
		require.NoError(t, err)
		return removed
	}
	trim := func(t *testing.T, b bundle, keepChars, keepRuns int) int {
		t.Helper()
		n, err := b.s.TrimToolResults(testContext(t), b.sid, keepChars, keepRuns)
		require.NoError(t, err)
		return n
	}

	t.Run("UnknownSessionIsEmpty", func(t *testing.T) {
		b := setup(t)
		require.Empty(t, segments(t, b))
		flat, err := loop.LoadSession(testContext(t), b.s, b.sid)
		require.NoError(t, err)
		require.Empty(t, flat)
	})

	t.Run("AppendKeepsInsertionOrder", func(t *testing.T) {
		b := setup(t)
		want := three(t, b)
		requireSegments(t, want, segments(t, b))
		flat, err := loop.LoadSession(testContext(t), b.s, b.sid)
		require.NoError(t, err)
		requireEntries(t, append(append(append([]loop.Entry{}, want[0].Entries...), want[1].Entries...), want[2].Entries...), flat)
	})

	t.Run("AppendIsIdempotentByRunID", func(t *testing.T) {
		b := setup(t)
		first := loop.Segment{RunID: "run-1", Entries: []loop.Entry{loop.UserText("first")}, Meta: map[string]any{"v": 1}}
		appendSeg(t, b, first)
		id := appendSeg(t, b, loop.Segment{RunID: "run-1", Entries: []loop.Entry{loop.UserText("second"), loop.AssistantText("x")}})
		require.Equal(t, "run-1", id)
		requireSegments(t, []loop.Segment{first}, segments(t, b))
	})

	t.Run("ConcurrentAppendsOfOneRunIDStoreOne", func(t *testing.T) {
		b := setup(t)
		ctx := testContext(t)
		const writers = 6
		var wg sync.WaitGroup
		errs := make([]error, writers)
		for i := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = b.s.Append(ctx, b.sid, loop.Segment{RunID: "run-x", Entries: []loop.Entry{loop.UserText(fmt.Sprint(i))}})
			}()
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		segs := segments(t, b)
		require.Len(t, segs, 1)
		require.Len(t, segs[0].Entries, 1)
	})

	t.Run("GeneratedRunIDs", func(t *testing.T) {
		b := setup(t)
		id1 := appendSeg(t, b, loop.Segment{Entries: []loop.Entry{loop.UserText("a")}})
		id2 := appendSeg(t, b, loop.Segment{Entries: []loop.Entry{loop.UserText("b")}})
		require.Regexp(t, validID, id1)
		require.Regexp(t, validID, id2)
		require.NotEqual(t, id1, id2)
		segs := segments(t, b)
		require.Equal(t, []string{id1, id2}, []string{segs[0].RunID, segs[1].RunID})
		again := appendSeg(t, b, loop.Segment{RunID: id1, Entries: []loop.Entry{loop.UserText("c")}})
		require.Equal(t, id1, again)
		require.Len(t, segments(t, b), 2, "a generated id is idempotent like any other")
	})

	t.Run("SessionsAreIndependent", func(t *testing.T) {
		b := setup(t)
		other := bundle{s: b.s, sid: newID("other")}
		appendSeg(t, b, loop.Segment{RunID: "run-1", Entries: []loop.Entry{loop.UserText("mine")}})
		appendSeg(t, other, loop.Segment{RunID: "run-1", Entries: []loop.Entry{loop.UserText("theirs")}})
		require.NoError(t, b.s.Clear(testContext(t), b.sid))
		require.Empty(t, segments(t, b))
		requireSegments(t, []loop.Segment{{RunID: "run-1", Entries: []loop.Entry{loop.UserText("theirs")}}}, segments(t, other))
	})

	t.Run("ClearRemovesEverything", func(t *testing.T) {
		b := setup(t)
		ctx := testContext(t)
		require.NoError(t, b.s.Clear(ctx, b.sid), "clearing an unknown session")
		three(t, b)
		require.NoError(t, b.s.Clear(ctx, b.sid))
		require.Empty(t, segments(t, b))
		require.NoError(t, b.s.Clear(ctx, b.sid), "clearing twice")
		seg := loop.Segment{RunID: "run-c", Entries: []loop.Entry{loop.UserText("again")}}
		appendSeg(t, b, seg)
		requireSegments(t, []loop.Segment{seg}, segments(t, b))
	})

	t.Run("LargeSegmentRoundTrips", func(t *testing.T) {
		b := setup(t)
		big := largeOutput(LargeOutputSize)
		seg := loop.Segment{RunID: "run-big", Entries: []loop.Entry{
			loop.UserText("dump it"), loop.ToolCallEntry("c1", "dump", "{}"), loop.ToolResultEntry("c1", "dump", big, false), loop.AssistantText("done"),
		}, Meta: map[string]any{"context_state": map[string]any{"k": "v"}}}
		appendSeg(t, b, seg)
		appendSeg(t, b, loop.Segment{RunID: "run-small", Entries: []loop.Entry{loop.UserText("next")}})
		segs := segments(t, b)
		require.Len(t, segs, 2)
		require.True(t, big == segs[0].Entries[2].Output, "the 5 MB output differs after the round trip")
		requireSegments(t, []loop.Segment{seg, {RunID: "run-small", Entries: []loop.Entry{loop.UserText("next")}}}, segs)
	})

	t.Run("SegmentsAreCopies", func(t *testing.T) {
		b := setup(t)
		seg := loop.Segment{RunID: "run-1", Entries: turn(1), Meta: map[string]any{"context_state": map[string]any{"n": 1}}}
		appendSeg(t, b, seg)
		seg.Entries[0].Text = "mutated"
		seg.Entries[2].Raw[0] = '['
		seg.Entries[2].Parts[0].Text = "mutated"
		seg.Meta["context_state"].(map[string]any)["n"] = 2
		want := []loop.Segment{{RunID: "run-1", Entries: turn(1), Meta: map[string]any{"context_state": map[string]any{"n": 1}}}}
		got := segments(t, b)
		requireSegments(t, want, got)
		got[0].Entries[0].Text = "mutated"
		got[0].Entries[2].Parts[0].Text = "mutated"
		got[0].Meta["context_state"].(map[string]any)["n"] = 3
		requireSegments(t, want, segments(t, b))
	})

	t.Run("RewindToZeroEmpties", func(t *testing.T) {
		b := setup(t)
		three(t, b)
		require.Equal(t, 9, rewind(t, b, 0))
		require.Empty(t, segments(t, b))
	})

	t.Run("RewindPastTheEndIsANoop", func(t *testing.T) {
		b := setup(t)
		want := three(t, b)
		require.Equal(t, 0, rewind(t, b, 9))
		require.Equal(t, 0, rewind(t, b, 50))
		requireSegments(t, want, segments(t, b))
	})

	t.Run("RewindUnknownSessionIsANoop", func(t *testing.T) {
		b := setup(t)
		require.Equal(t, 0, rewind(t, b, 0))
		require.Equal(t, 0, rewind(t, b, 3))
	})

	t.Run("RewindNegativeIsAnError", func(t *testing.T) {
		b := setup(t)
		three(t, b)
		_, err := b.s.Rewind(testContext(t), b.sid, -1)
		require.Error(t, err)
		require.Len(t, segments(t, b), 3)
	})

	t.Run("RewindAtASegmentBoundaryKeepsMeta", func(t *testing.T) {
		b := setup(t)
		want := three(t, b)
		require.Equal(t, 3, rewind(t, b, 6))
		requireSegments(t, want[:2], segments(t, b))
	})

	t.Run("RewindInsideASegmentTruncatesAndDropsMeta", func(t *testing.T) {
		b := setup(t)
		want := three(t, b)
		// Keep run-c whole and the first three entries of run-a: its user
		// text, the assistant text and the call, whose result is cut, so the
		// call is dangling and goes too.
		require.Equal(t, 9-2-2, rewind(t, b, 5))
		got := segments(t, b)
		requireSegments(t, []loop.Segment{
			want[0],
			{RunID: "run-a", Entries: want[1].Entries[:2]},
		}, got)
		require.Empty(t, got[1].Meta, "the segment the cut lands in loses its meta")
		require.Empty(t, loop.PendingToolCalls(got[1].Entries), "the cut segment is tool-consistent")
	})

	t.Run("RewindCountsDroppedDanglingCalls", func(t *testing.T) {
		b := setup(t)
		want := three(t, b)
		// The cut keeps run-b's user text and call; the call's result is
		// cut, so the call goes too: two entries removed, not one.
		require.Equal(t, 2, rewind(t, b, 8))
		requireSegments(t, []loop.Segment{want[0], want[1], {RunID: "run-b", Entries: want[2].Entries[:1]}}, segments(t, b))
	})

	t.Run("RewindToOnlyADanglingCallDeletesTheSegment", func(t *testing.T) {
		b := setup(t)
		first := loop.Segment{RunID: "run-1", Entries: []loop.Entry{loop.UserText("q"), loop.AssistantText("a")}, Meta: map[string]any{"m": 1}}
		second := loop.Segment{RunID: "run-2", Entries: []loop.Entry{loop.ToolCallEntry("c1", "f", "{}"), loop.ToolResultEntry("c1", "f", "ok", false)}}
		appendSeg(t, b, first)
		appendSeg(t, b, second)
		require.Equal(t, 2, rewind(t, b, 3))
		requireSegments(t, []loop.Segment{first}, segments(t, b))
	})

	t.Run("AppendAfterRewindGoesLast", func(t *testing.T) {
		b := setup(t)
		want := three(t, b)
		rewind(t, b, 7)
		next := loop.Segment{RunID: "run-d", Entries: []loop.Entry{loop.UserText("next")}}
		appendSeg(t, b, next)
		requireSegments(t, []loop.Segment{want[0], want[1], {RunID: "run-b", Entries: want[2].Entries[:1]}, next}, segments(t, b))
		// A run id removed by the rewind can be appended again.
		appendSeg(t, b, loop.Segment{RunID: "run-c", Entries: []loop.Entry{loop.UserText("run-c again")}})
		require.Len(t, segments(t, b), 4, "run-c is still present, so the append is a no-op")
	})

	t.Run("RunIDsRemovedByRewindCanBeAppendedAgain", func(t *testing.T) {
		b := setup(t)
		want := three(t, b)
		require.Equal(t, 7, rewind(t, b, 2))
		again := loop.Segment{RunID: "run-b", Entries: []loop.Entry{loop.UserText("run-b again")}}
		appendSeg(t, b, again)
		requireSegments(t, []loop.Segment{want[0], again}, segments(t, b))
	})

	t.Run("TrimToolResultsKeepsTheLastRuns", func(t *testing.T) {
		b := setup(t)
		long := strings.Repeat("0123456789", 100) // 1000 chars
		var want []loop.Segment
		for i := range 3 {
			id := fmt.Sprintf("c%d", i)
			res := loop.ToolResultEntry(id, "f", long, i == 1)
			res.Raw = []byte(`{"big":true}`)
			seg := loop.Segment{
				RunID:   fmt.Sprintf("run-%d", i),
				Entries: []loop.Entry{loop.UserText("q"), loop.ToolCallEntry(id, "f", "{}"), res, loop.ToolResultEntry(id+"s", "f", "short", false)},
				Meta:    map[string]any{"i": i},
			}
			appendSeg(t, b, seg)
			want = append(want, seg)
		}
		require.Equal(t, 2, trim(t, b, 100, 1))
		got := segments(t, b)
		require.Len(t, got, 3)
		for i := range 2 {
			g := got[i]
			require.Len(t, g.Entries, 4, "count is kept")
			require.Equal(t, want[i].RunID, g.RunID)
			requireJSON(t, want[i].Meta, g.Meta, "meta is kept")
			requireEntries(t, want[i].Entries[:2], g.Entries[:2])
			requireEntries(t, want[i].Entries[3:], g.Entries[3:], "short outputs are untouched")
			r := g.Entries[2]
			require.Equal(t, loop.KindToolResult, r.Kind)
			require.Equal(t, want[i].Entries[2].CallID, r.CallID)
			require.Equal(t, want[i].Entries[2].IsError, r.IsError)
			require.Empty(t, r.Raw, "raw is dropped")
			require.True(t, strings.HasPrefix(r.Output, long[:100]), "the first keepChars chars are kept")
			require.Contains(t, r.Output, "900 chars trimmed from stored history")
			require.Contains(t, r.Output, fmt.Sprintf(`recall_tool_result("c%d")`, i))
			require.True(t, strings.HasSuffix(r.Output, loop.TrimMarkerTail))
			require.Less(t, len(r.Output), len(long))
		}
		requireSegments(t, want[2:], got[2:])
	})

	t.Run("TrimToolResultsIsIdempotent", func(t *testing.T) {
		b := setup(t)
		long := strings.Repeat("x", 5000)
		for i := range 2 {
			appendSeg(t, b, loop.Segment{RunID: fmt.Sprintf("run-%d", i), Entries: []loop.Entry{
				loop.ToolCallEntry("c", "f", "{}"), loop.ToolResultEntry("c", "f", long, false),
			}})
		}
		require.Equal(t, 2, trim(t, b, 10, 0))
		once := segments(t, b)
		require.Equal(t, 0, trim(t, b, 10, 0), "trimmed outputs are recognized")
		require.Equal(t, 0, trim(t, b, 5, 0), "also with a smaller keepChars")
		requireSegments(t, once, segments(t, b))
	})

	t.Run("TrimToolResultsSkipsWhenNothingIsSaved", func(t *testing.T) {
		b := setup(t)
		// 150 chars: longer than keepChars, but the marker is longer than
		// what it would remove.
		out := strings.Repeat("y", 150)
		seg := loop.Segment{RunID: "run-1", Entries: []loop.Entry{loop.ToolCallEntry("c", "f", "{}"), loop.ToolResultEntry("c", "f", out, false)}}
		appendSeg(t, b, seg)
		appendSeg(t, b, loop.Segment{RunID: "run-2", Entries: []loop.Entry{loop.UserText("z")}})
		require.Equal(t, 0, trim(t, b, 100, 1))
		require.Equal(t, 0, trim(t, b, 400, 0), "outputs within keepChars are untouched")
		requireSegments(t, []loop.Segment{seg}, segments(t, b)[:1])
	})

	t.Run("TrimToolResultsKeepRunsBounds", func(t *testing.T) {
		b := setup(t)
		long := strings.Repeat("z", 2000)
		for i := range 2 {
			appendSeg(t, b, loop.Segment{RunID: fmt.Sprintf("run-%d", i), Entries: []loop.Entry{
				loop.ToolCallEntry("c", "f", "{}"), loop.ToolResultEntry("c", "f", long, false),
			}})
		}
		require.Equal(t, 0, trim(t, b, 10, 2), "keepRuns covering every segment trims nothing")
		require.Equal(t, 0, trim(t, b, 10, 5))
		require.Equal(t, 2, trim(t, b, 10, 0), "keepRuns 0 trims every segment")
		_, err := b.s.TrimToolResults(testContext(t), b.sid, -1, 0)
		require.Error(t, err, "negative keepChars")
		_, err = b.s.TrimToolResults(testContext(t), b.sid, 10, -1)
		require.Error(t, err, "negative keepRuns")
	})

	t.Run("TrimToolResultsOnALargeSegment", func(t *testing.T) {
		b := setup(t)
		big := largeOutput(LargeOutputSize)
		appendSeg(t, b, loop.Segment{RunID: "run-big", Entries: []loop.Entry{loop.ToolCallEntry("c", "f", "{}"), loop.ToolResultEntry("c", "f", big, false)}})
		appendSeg(t, b, loop.Segment{RunID: "run-next", Entries: []loop.Entry{loop.UserText("z")}})
		require.Equal(t, 1, trim(t, b, 400, 1))
		got := segments(t, b)
		require.Len(t, got, 2)
		require.Less(t, len(got[0].Entries[1].Output), 1000)
		require.Equal(t, []string{"run-big", "run-next"}, []string{got[0].RunID, got[1].RunID}, "trimming keeps the order")
	})

	t.Run("TrimToolResultsUnknownSession", func(t *testing.T) {
		b := setup(t)
		require.Equal(t, 0, trim(t, b, 10, 0))
	})
}
