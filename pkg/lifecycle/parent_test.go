package lifecycle_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/lifecycle"
)

// A run's record names its parent when its request's metadata does
// (parent_run_id, a valid id), whether the API indexed it or a raw
// publish started it; anything else names none.
func TestParentRunIDFromMetadata(t *testing.T) {
	for _, tc := range []struct {
		name string
		meta map[string]any
		want string
	}{
		{"named", map[string]any{"parent_run_id": "run-1", "parent_agent": "lead"}, "run-1"},
		{"none", nil, ""},
		{"not_a_string", map[string]any{"parent_run_id": 7}, ""},
		{"not_an_id", map[string]any{"parent_run_id": "a.b"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := lifecycle.Submit(lifecycle.Submission{RunID: "child", Agent: "helper", Metadata: tc.meta})
			require.Equal(t, tc.want, r.ParentRunID)
			r, _ = lifecycle.ClaimNew(lifecycle.Claim{Worker: "w1", Seq: 3, Now: time.Now()}, "child", "helper", "", tc.meta)
			require.Equal(t, tc.want, r.ParentRunID)
		})
	}
}
