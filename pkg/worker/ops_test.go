package worker_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// TestFreshRunReadsNoEvents (throughput): the claim of a run no worker has
// claimed before reads neither its events nor its checkpoint head from the
// server — counted on the JetStream API subjects the server receives, not
// by our own code. A resubmitted run (it has run before) still reads its
// last event.
func TestFreshRunReadsNoEvents(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents})
	ctx := context.Background()
	var eventReads atomic.Int64
	spy := f.Connect()
	sub, err := spy.Subscribe("$JS.API.>", func(m *nats.Msg) {
		if strings.Contains(m.Subject, "GET.LOVIA_EVENTS") {
			eventReads.Add(1)
		}
	})
	require.NoError(t, err)
	require.NoError(t, spy.Flush())
	t.Cleanup(func() { _ = sub.Unsubscribe() })

	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "calc", Input: bus.TextInput("x")})
	require.NoError(t, err)
	envs := f.Events(rep.RunID, 10*time.Second)
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)
	waitIdle(t, f, 10*time.Second)
	require.NoError(t, spy.Flush())
	require.Zero(t, eventReads.Load(), "the claim of a fresh run read the run's events")

	// A run that has run before is claimed the whole way.
	_, err = f.Client.Submit(ctx, &bus.RunRequest{RunID: rep.RunID, Agent: "calc", Input: bus.TextInput("x"), IfRunExists: bus.IfExistsRestart})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return eventReads.Load() > 0 }, 10*time.Second, 10*time.Millisecond,
		"a resubmitted run's claim did not read its last event")
}
