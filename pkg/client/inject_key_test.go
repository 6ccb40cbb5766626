package client_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// TestInjectKey: injects with one key from two clients on two
// connections, at once, answer one token and reach the run once; the
// folded message is not withdrawable.
func TestInjectKey(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "napper", Input: bus.TextInput("nap")})
	require.NoError(t, err)
	waitEvent(t, f.Client, rep.RunID, loop.EventToolCallStarted)

	other, err := client.New(f.Connect(), client.Options{})
	require.NoError(t, err)
	var (
		mu     sync.Mutex
		tokens []string
		wg     sync.WaitGroup
	)
	for _, c := range []*client.Client{f.Client, other, f.Client, other} {
		wg.Go(func() {
			tok, err := c.Inject(ctx, rep.RunID, "also check the logs", bus.InjectKey("steer-1"))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			tokens = append(tokens, tok)
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Len(t, tokens, 4)
	for _, tok := range tokens[1:] {
		require.Equal(t, tokens[0], tok, "one token for one key")
	}

	envs := tailAll(t, f.Client, rep.RunID)
	inj := fleettest.OfType(envs, loop.EventUserMessageInjected)
	require.Len(t, inj, 1, "types %v", fleettest.Types(envs))
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)
	removed, err := f.Client.Uninject(ctx, rep.RunID, tokens[0])
	require.NoError(t, err)
	require.False(t, removed, "a folded message cannot be withdrawn")
}
