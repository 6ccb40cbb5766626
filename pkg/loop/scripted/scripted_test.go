package scripted_test

import (
	"context"
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
