package compaction_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/compaction"
)

func TestEstimate(t *testing.T) {
	t.Parallel()

	t.Run("Entries", func(t *testing.T) {
		t.Parallel()
		img := loop.Part{Type: loop.PartImage, URL: "https://x/y.png"}
		file := loop.Part{Type: loop.PartFile, Data: "AAAA"}
		for name, tc := range map[string]struct {
			e    loop.Entry
			want int
		}{
			"user":              {user(strings.Repeat("a", 40)), 18},
			"utf8 bytes":        {user(strings.Repeat("é", 20)), 18}, // 40 bytes
			"assistant":         {text("abcdefg"), 9},
			"reasoning":         {loop.Entry{Kind: loop.KindReasoning, Text: strings.Repeat("r", 400)}, 108},
			"call":              {loop.ToolCallEntry("c1", "abcd", `{"x":1234}`), 11},
			"result":            {res("c1", strings.Repeat("o", 4001)), 1008},
			"input parts":       {loop.Entry{Kind: loop.KindInput, Role: loop.RoleUser, Parts: []loop.Part{{Type: loop.PartText, Text: strings.Repeat("t", 80)}, img, file}}, 8 + 20 + 77 + 2000},
			"result with parts": {loop.Entry{Kind: loop.KindToolResult, CallID: "c", Output: strings.Repeat("o", 4000), Parts: []loop.Part{img}}, 8 + 77},
		} {
			require.Equal(t, tc.want, compaction.EstimateEntry(&tc.e, 77), name)
		}
	})

	t.Run("Tools", func(t *testing.T) {
		t.Parallel()
		params := json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}}}`)
		ts := []loop.ToolSchema{{Name: "add", Description: "Add.", Parameters: params}}
		overhead := len(`{"type":"function","function":{"name":"","description":"","parameters":}}`)
		require.Equal(t, (overhead+3+4+len(params))/4+8, compaction.EstimateTools(ts))
		require.Equal(t, 2*compaction.EstimateTools(ts), compaction.EstimateTools(append(ts, ts[0])))
	})

	t.Run("ProviderCounterWinsAndFallsBack", func(t *testing.T) {
		t.Parallel()
		es := []loop.Entry{user("hello there")}
		heuristic := compact(t, compaction.New(compaction.Config{}), request(newProvider(), es)).Estimate
		p := &estimating{provider: *newProvider(), fn: func([]loop.Entry, []loop.ToolSchema) (int, error) { return 4242, nil }}
		require.Equal(t, 4242, compact(t, compaction.New(compaction.Config{}), request(p, es)).Estimate)
		p.fn = func([]loop.Entry, []loop.ToolSchema) (int, error) { return 0, errors.New("no tokenizer") }
		require.Equal(t, heuristic, compact(t, compaction.New(compaction.Config{}), request(p, es)).Estimate)
	})
}

func TestCalibration(t *testing.T) {
	t.Parallel()
	es := []loop.Entry{user(strings.Repeat("a", 4000))} // 1008 raw
	c := compaction.New(compaction.Config{})
	req := request(newProvider(), es)
	r := compact(t, c, req)
	require.Equal(t, 1008, r.Estimate, "ratio starts at 1")
	require.Equal(t, 1008, toInt(t, stateOf(t, req)["last_view_estimate"]))

	// The provider counted twice the estimate: ratio ← 0.8·1 + 0.2·2 = 1.2.
	req.LastInputTokens = 2016
	r = compact(t, c, req)
	require.InDelta(t, 1.2, stateOf(t, req)["ratio"], 1e-9)
	require.Equal(t, 1209, r.Estimate) // int(1008 × 1.2)
	require.Equal(t, 1008, toInt(t, stateOf(t, req)["last_view_estimate"]), "the raw estimate is remembered, not the calibrated one")

	// No count (reactive path, first call): no change.
	req.LastInputTokens = 0
	compact(t, c, req)
	require.InDelta(t, 1.2, stateOf(t, req)["ratio"], 1e-9)

	// Clamped to [0.5, 2.5].
	for range 30 {
		req.LastInputTokens = 1_000_000
		compact(t, c, req)
	}
	require.InDelta(t, 2.5, stateOf(t, req)["ratio"], 1e-9)
	for range 30 {
		req.LastInputTokens = 1
		compact(t, c, req)
	}
	require.InDelta(t, 0.5, stateOf(t, req)["ratio"], 1e-9)
}

// toInt reads a state number.
func toInt(t testing.TB, v any) int {
	t.Helper()
	switch x := v.(type) {
	case int:
		return x
	case int64:
		return int(x)
	case float64:
		return int(x)
	}
	t.Fatalf("not a number: %T %v", v, v)
	return 0
}
