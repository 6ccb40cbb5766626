package loop_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

// TestFinalMessageBeforeOutputGuardrail: a final message is stored with
// the run's completion in one append only when nothing comes between
// them; an output guardrail (which may be a model call of its own) finds
// the message checkpointed already, so a crash during it does not call
// the run's model again.
func TestFinalMessageBeforeOutputGuardrail(t *testing.T) {
	p := scripted.New([]scripted.Step{scripted.Text("fine")})
	cp := &cadenceCheckpointer{MemoryCheckpointer: loop.NewMemoryCheckpointer()}
	var seen []string
	a := agentWith(p)
	a.OutputGuardrails = []loop.OutputGuardrail{func(ctx context.Context, _ *loop.RunContext, _ any) (string, error) {
		snap, err := cp.Load(ctx, "r1")
		if err != nil {
			return "", err
		}
		seen = entrySigs(snap.Entries)
		return "", nil
	}}
	_, res, err := stream(t, a, "hi", loop.WithCheckpoint(cp, "r1"))
	require.NoError(t, err)
	require.Equal(t, "fine", res.Output)
	require.Equal(t, []string{"In(user,hi)", "Txt(fine)"}, seen, "the guardrail ran before the final message was stored")
	require.Len(t, cp.writes, 2, "the message, then the completion")
	require.Equal(t, loop.StatusRunning, cp.writes[0].Head.Status)
	require.Equal(t, loop.StatusCompleted, cp.writes[1].Head.Status)
}
