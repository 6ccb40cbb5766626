package scripted_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

// A call scripted without arguments — nil, or the nil map an agents file's
// call without `args` decodes to — sends the empty object a model would,
// never "null" (which a tool's argument decoder refuses).
func TestCallWithoutArgsSendsEmptyObject(t *testing.T) {
	var none map[string]any
	model := scripted.New([]scripted.Step{scripted.Batch(
		scripted.Call{ID: "a", Name: "t"},
		scripted.Call{ID: "b", Name: "t", Args: none},
		scripted.Call{ID: "c", Name: "t", Args: map[string]any{"x": 1}},
	)})
	var got []string
	err := model.Stream(context.Background(), &loop.ModelRequest{}, func(d loop.Delta) error {
		if d.Kind == loop.DeltaToolCall {
			got = append(got, d.Arguments)
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{"{}", "{}", `{"x":1}`}, got)
}

// TestRecordedRequestsAreBounded: a provider keeps the requests it
// received, in order, but only the last 1,024 of them — a scripted agent
// in a long-lived worker does not keep every request of every run.
func TestRecordedRequestsAreBounded(t *testing.T) {
	model := scripted.New([]scripted.Step{scripted.Text("ok")}, scripted.Sequential())
	call := func(n int) {
		// Each request names its number; the script's one step answers
		// the first, the others fail (exhausted) after being recorded.
		req := &loop.ModelRequest{Entries: []loop.Entry{loop.UserText(strconv.Itoa(n))}}
		_ = model.Stream(context.Background(), req, func(loop.Delta) error { return nil })
	}
	numbers := func() []string {
		var out []string
		for _, r := range model.Requests() {
			out = append(out, r.Entries[0].Content)
		}
		return out
	}
	for n := range 3 {
		call(n)
	}
	require.Equal(t, []string{"0", "1", "2"}, numbers())
	for n := 3; n < 1024+500; n++ {
		call(n)
	}
	got := numbers()
	require.Len(t, got, 1024, "kept every request")
	for i, n := range got {
		require.Equal(t, strconv.Itoa(500+i), n, "the %dth kept request", i)
	}
}
