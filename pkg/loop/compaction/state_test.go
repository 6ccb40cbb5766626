package compaction_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/compaction"
)

// chatty is a conversation where every turn has a user message, a call
// whose result is alternately large and medium, and an assistant remark:
// all three stages are needed to fit a small window.
func chatty(turns int) []loop.Entry {
	es := []loop.Entry{sys("You are a test agent.")}
	for i := range turns {
		id := fmt.Sprintf("c%d", i)
		n := 1000
		if i%2 == 0 {
			n = 6000
		}
		es = append(es, user(payload("u"+id, 400)), call(id), res(id, payload(id, n)), text(payload("a"+id, 600)))
	}
	return es
}

// allStages is a policy that needs offload, clear and summary on chatty(40).
func allStages(sum compaction.Summarizer) *compaction.Compaction {
	return compaction.New(compaction.Config{ContextWindow: 16000, ReserveOutputTokens: 4000, Summarizer: sum})
}

func TestState(t *testing.T) {
	t.Parallel()

	t.Run("Shape", func(t *testing.T) {
		t.Parallel()
		req := request(newProvider(), chatty(40))
		r := compact(t, allStages(&fakeSummarizer{}), req)
		require.Equal(t, "offload+clear+summary", r.Reason)
		st := stateOf(t, req)
		require.ElementsMatch(t, []string{"version", "cleared", "offloaded", "summary", "ratio", "last_view_estimate",
			"summary_failures", "learned_windows"}, keys(st))
		require.Equal(t, 3, st["version"])
		cleared := st["cleared"].([]any)
		require.NotEmpty(t, cleared)
		ids := make([]string, len(cleared))
		for i, v := range cleared {
			ids[i] = v.(string)
		}
		require.True(t, slices.IsSorted(ids), "cleared ids are sorted")
		off := st["offloaded"].(map[string]any)
		require.NotEmpty(t, off)
		for id, v := range off {
			rec := v.(map[string]any)
			require.ElementsMatch(t, []string{"preview", "chars", "digest"}, keys(rec), id)
			require.Equal(t, 6000, rec["chars"])
			require.Equal(t, compaction.Digest(payload(id, 6000)), rec["digest"])
			require.Equal(t, payload(id, 6000)[:400], rec["preview"])
		}
		sum := st["summary"].(map[string]any)
		require.ElementsMatch(t, []string{"text", "covered", "fingerprint"}, keys(sum))
		require.Len(t, sum["fingerprint"], 16)
		require.Equal(t, *r.Summary, sum["text"])
		require.Equal(t, 1.0, st["ratio"])
		require.Equal(t, 0, st["summary_failures"])
		require.Equal(t, map[string]any{}, st["learned_windows"])
		require.Contains(t, r.Detail, fmt.Sprintf("%d tool result(s) cleared in total", len(cleared)))
		require.Contains(t, r.Detail, fmt.Sprintf("%d tool result(s) offloaded in total", len(off)))
		require.Contains(t, r.Detail, fmt.Sprintf("summary covers %d message(s)", sum["covered"]))
		require.Regexp(t, `^context was \d+% full$`, r.Detail[0])
	})

	roundTrips := map[string]func(t testing.TB, m map[string]any) map[string]any{
		"JSON": jsonRoundTrip,
		"msgpack": func(t testing.TB, m map[string]any) map[string]any {
			b, err := msgpack.Marshal(m)
			require.NoError(t, err)
			var out map[string]any
			require.NoError(t, msgpack.Unmarshal(b, &out))
			return out
		},
	}
	for name, rt := range roundTrips {
		t.Run("RoundTrip"+name, func(t *testing.T) {
			t.Parallel()
			es := chatty(40)
			p := newProvider()
			c := allStages(&fakeSummarizer{})
			req := request(p, es)
			first := compact(t, c, req)
			require.True(t, first.Compacted)

			// The state as a checkpoint store hands it back.
			next := request(p, es)
			next.State = rt(t, req.State)
			again := compact(t, c, next)
			require.False(t, again.Compacted, "no new decision after the round trip")
			require.Equal(t, "sticky_replay", again.Reason)
			require.Equal(t, viewBytes(t, first.Entries), viewBytes(t, again.Entries))
			require.Equal(t, first.Estimate, again.Estimate)
			// Saved again in canonical form.
			require.Equal(t, jsonRoundTrip(t, stateOf(t, req)), jsonRoundTrip(t, stateOf(t, next)))
		})
	}

	t.Run("LenientLoad", func(t *testing.T) {
		t.Parallel()
		es := []loop.Entry{user("hi"), call("c1"), res("c1", payload("c1", 500))}
		p := newProvider()
		key := "https://api.example\x00m1"
		for name, tc := range map[string]struct {
			state   any
			cleared bool
			ratio   float64
			learned map[string]any
		}{
			"missing":       {nil, false, 1, map[string]any{}},
			"garbage":       {"nope", false, 1, map[string]any{}},
			"wrong version": {map[string]any{"version": 2, "cleared": []any{"c1"}}, false, 1, map[string]any{}},
			"float version": {map[string]any{"version": 3.0, "cleared": []any{"c1"}}, true, 1, map[string]any{}},
			"int64 numbers": {map[string]any{"version": int64(3), "cleared": []string{"c1"}, "ratio": int8(2)}, true, 2, map[string]any{}},
			"ratio clamped": {map[string]any{"version": 3, "ratio": 9.5}, false, 2.5, map[string]any{}},
			"bad ratio":     {map[string]any{"version": 3, "ratio": "fast"}, false, 1, map[string]any{}},
			"learned windows": {map[string]any{"version": 3, "learned_windows": map[string]any{
				key: 8192.0, "tiny\x00m": 10, "huge\x00m": int64(50_000_000), "junk\x00m": "x"}},
				false, 1, map[string]any{key: 8192.0}},
			"garbled records": {map[string]any{"version": uint8(3), "cleared": []any{"c1", 7},
				"offloaded": map[string]any{"c1": "x"}, "summary": map[string]any{"text": 1}}, true, 1, map[string]any{}},
		} {
			req := request(p, es)
			if tc.state != nil {
				req.State[compaction.StateKey] = tc.state
			}
			r := compact(t, compaction.New(compaction.Config{}), req)
			st := stateOf(t, req)
			require.Equal(t, 3, st["version"], name)
			require.InDelta(t, tc.ratio, st["ratio"], 1e-9, name)
			require.Equal(t, tc.learned, jsonRoundTrip(t, map[string]any{"w": st["learned_windows"]})["w"].(map[string]any), name)
			require.Nil(t, st["summary"], name)
			require.Equal(t, map[string]any{}, st["offloaded"], name)
			if tc.cleared {
				require.Equal(t, []any{"c1"}, st["cleared"], name)
				require.Equal(t, compaction.ClearMarker("c1"), r.Entries[2].Output, name)
				require.Equal(t, "sticky_replay", r.Reason, name)
			} else {
				require.Empty(t, st["cleared"], name)
				require.False(t, r.Changed, name)
			}
		}
	})

	t.Run("PruneRecordsOfVanishedOrAmbiguousResults", func(t *testing.T) {
		t.Parallel()
		es := []loop.Entry{user("hi"), call("c1"), res("c1", "one"), call("dup"), res("dup", "a"), call("dup"), res("dup", "b")}
		req := request(newProvider(), es)
		req.State[compaction.StateKey] = map[string]any{"version": 3, "cleared": []any{"c1", "dup", "gone"},
			"offloaded": map[string]any{"gone2": map[string]any{"preview": "p", "chars": 10, "digest": "d"}}}
		r := compact(t, compaction.New(compaction.Config{}), req)
		st := stateOf(t, req)
		require.Equal(t, []any{"c1"}, st["cleared"], "ids carried by no result or by two are dropped")
		require.Equal(t, map[string]any{}, st["offloaded"])
		require.Equal(t, []string{compaction.ClearMarker("c1"), "a", "b"},
			[]string{r.Entries[2].Output, r.Entries[4].Output, r.Entries[6].Output})
	})
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
