package loop_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

// TestDescribeCancelled: a cancelled run's error is not retryable — the
// cancel was asked for — and says how to continue it after all (issue 25,
// item 5).
func TestDescribeCancelled(t *testing.T) {
	info := loop.Describe(&loop.RunCancelled{Reason: "user pressed stop"})
	require.Equal(t, loop.ErrorInfo{Type: "RunCancelled", Message: "user pressed stop", Hint: loop.CancelledHint}, info)
	require.False(t, info.Retryable)
}

// TestFreshRunNeedsInput: a run with no input and no checkpoint to resume
// is refused before it starts (a model call on nothing): a raw publish of
// a run id alone (issue 25, item 4).
func TestFreshRunNeedsInput(t *testing.T) {
	a := &loop.Agent{Name: "a", Provider: scripted.New([]scripted.Step{scripted.Text("hi")})}
	_, err := loop.NewRunner(loop.RunnerConfig{}).Run(context.Background(), a, nil)
	var ue *loop.UserError
	require.ErrorAs(t, err, &ue)
	require.Contains(t, ue.Message, "no input")
	require.Contains(t, ue.Hint, "give the run an input")
}
