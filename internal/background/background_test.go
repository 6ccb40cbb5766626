package background

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLoopRunsUntilStop(t *testing.T) {
	var l Loop
	require.NoError(t, l.Stop(context.Background()), "Stop before Start")
	started := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, l.Start(ctx, "x: Thing", func(ctx context.Context) {
		close(started)
		<-ctx.Done()
	}))
	cancel() // only bounds the start
	<-started
	require.EqualError(t, l.Start(context.Background(), "x: Thing", func(context.Context) {}), "x: Thing.Start called twice")
	require.NoError(t, l.Stop(context.Background()))
	require.NoError(t, l.Stop(context.Background()), "a second Stop")
}

func TestLoopStopGivesUpWithItsContext(t *testing.T) {
	var l Loop
	release := make(chan struct{})
	require.NoError(t, l.Start(context.Background(), "x: Thing", func(context.Context) { <-release }))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, l.Stop(ctx), context.DeadlineExceeded)
	close(release)
	require.NoError(t, l.Stop(context.Background()))
}
