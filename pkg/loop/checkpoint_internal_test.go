package loop

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSameHead: two heads are the same when every field but UpdatedAt is
// deeply equal; a change of any other field (each field of RunHead is
// tried, so a new one must be compared too) makes them differ; and the
// comparison of running heads (no output, error or context state)
// allocates nothing.
func TestSameHead(t *testing.T) { // not parallel: AllocsPerRun
	base := func() RunHead {
		return RunHead{
			Agent: "a", Usage: Usage{InputTokens: 1, TotalTokens: 2}, Turns: 2, Status: StatusRunning,
			Output: map[string]any{"x": []any{1.0}}, Error: &ErrorInfo{Type: "T", Message: "m"},
			LastInputTokens: 7, ContextState: map[string]any{"k": "v"},
			UpdatedAt: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
		}
	}
	a, b := base(), base()
	b.UpdatedAt = b.UpdatedAt.Add(time.Hour)
	require.True(t, sameHead(&a, &b), "deep copies differing only in time")
	r1 := RunHead{Agent: "a", Usage: Usage{InputTokens: 5}, Turns: 1, Status: StatusRunning, UpdatedAt: time.Now()}
	r2 := r1
	r2.UpdatedAt = r1.UpdatedAt.Add(time.Second)
	require.True(t, sameHead(&r1, &r2))
	require.Zero(t, testing.AllocsPerRun(100, func() { sameHead(&r1, &r2) }))

	changes := map[string]func(h *RunHead){
		"Agent":           func(h *RunHead) { h.Agent = "b" },
		"Usage":           func(h *RunHead) { h.Usage.CacheReadTokens = 9 },
		"Turns":           func(h *RunHead) { h.Turns = 3 },
		"Status":          func(h *RunHead) { h.Status = StatusCompleted },
		"Output":          func(h *RunHead) { h.Output = map[string]any{"x": []any{2.0}} },
		"Error":           func(h *RunHead) { h.Error = &ErrorInfo{Type: "T", Message: "other"} },
		"LastInputTokens": func(h *RunHead) { h.LastInputTokens = 8 },
		"ContextState":    func(h *RunHead) { h.ContextState = map[string]any{} },
	}
	rt := reflect.TypeFor[RunHead]()
	for i := range rt.NumField() {
		name := rt.Field(i).Name
		if name == "UpdatedAt" {
			continue
		}
		change, ok := changes[name]
		require.True(t, ok, "RunHead.%s: sameHead must compare it (and this test change it)", name)
		c := base()
		change(&c)
		require.False(t, sameHead(&a, &c), "a head with another %s", name)
	}
	require.Len(t, changes, rt.NumField()-1)
}
