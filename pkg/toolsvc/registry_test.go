package toolsvc_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/toolsvc"
)

// The registry sees a service that starts after it, and keeps the tools
// of one that stops: their calls are clear errors until it is back.
func TestRegistryFollowsServices(t *testing.T) {
	t.Parallel()
	nc := setup(t)
	r, err := toolsvc.NewRegistry(toolsvc.RegistryConfig{Conn: nc, Refresh: 20 * time.Millisecond, Wait: 50 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, r.Stop(context.Background())) })
	_, err = r.ServerTools("mathsvc")
	require.ErrorContains(t, err, `no tool service "mathsvc" is running (running: none)`)

	var runs atomic.Int64
	s, err := toolsvc.New(toolsvc.Config{Conn: nc, Name: "mathsvc", Tools: counterTools(&runs, nil)})
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	require.Eventually(t, func() bool { return r.Has("mathsvc") }, 10*time.Second, 5*time.Millisecond, "waiting for the registry to see the service")
	tools, err := r.ServerTools("mathsvc")
	require.NoError(t, err)
	require.Len(t, tools, 3)
	out, err := invoke(tools[0], `{"a":1,"b":2}`)
	require.NoError(t, err)
	require.Equal(t, float64(3), out)

	require.NoError(t, s.Stop(context.Background()))
	require.Eventually(t, func() bool { return r.Services()[0].Instances == 0 }, 10*time.Second, 5*time.Millisecond, "waiting for the registry to see the service gone")
	tools, err = r.ServerTools("mathsvc")
	require.NoError(t, err)
	_, err = invoke(tools[0], `{"a":1,"b":2}`)
	require.ErrorIs(t, err, toolsvc.ErrNoService)
}
