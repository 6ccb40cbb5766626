package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// TestBadInputReportedOnTheRunsOwnSubject: a raw request with a valid
// run_id in its body (and no Nats-Msg-Id) but another bad field gets its
// run_failed on lovia.events.<run_id>, where its sender waits, not on
// lovia.events.run-<seq>; the run's status says failed too.
func TestBadInputReportedOnTheRunsOwnSubject(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents})
	ctx := context.Background()
	mp, err := msgpack.Marshal(map[string]any{"run_id": "bad-msgpack-type", "input": "x", "max_turns": "ten"})
	require.NoError(t, err)
	for _, tc := range []struct {
		runID, body, text string
		hdr               nats.Header
	}{
		{"bad-negative", `{"run_id":"bad-negative","input":"x","max_turns":-1}`, "max_turns", nil},
		{"bad-type", `{"max_turns":"ten","input":"x","run_id":"bad-type"}`, "max_turns", nil},
		{"bad-encoding", `{"run_id":"bad-encoding","input":"x","encoding":"xml"}`, "encoding", nil},
		{"bad-field", `{"run_id":"bad-field","inptu":"x"}`, "unknown field inptu", nil},
		{"bad-empty", `{"run_id":"bad-empty","input":""}`, "input", nil},
		{"bad-schema", `{"run_id":"bad-schema","input":"x","output_schema":"notaschema"}`, "output_schema", nil},
		{"bad-msgpack-type", string(mp), "", nats.Header{bus.HeaderContentType: {bus.ContentTypeMsgpack}}},
	} {
		publishRaw(t, f, "calc", []byte(tc.body), tc.hdr)
		envs := f.Events(tc.runID, 15*time.Second)
		require.NotEmpty(t, envs, "run %s: no event on its own subject", tc.runID)
		require.Len(t, envs, 1, "run %s: %v", tc.runID, fleettest.Types(envs))
		rf := fleettest.Event[*loop.RunFailed](t, envs[0])
		require.Equal(t, bus.TypeInvalidRequest, rf.Error.Type, "run %s: %+v", tc.runID, rf.Error)
		require.Contains(t, rf.Error.Message, tc.text, "run %s", tc.runID)
		require.NotEmpty(t, rf.Error.Hint, "run %s", tc.runID)
		var st *bus.StatusReply
		require.Eventually(t, func() bool {
			st, err = f.Client.Status(ctx, tc.runID)
			return err == nil && st.Status == bus.StateFailed
		}, 10*time.Second, 20*time.Millisecond, "waited for run %s's status to say failed (last: %+v, %v)", tc.runID, st, err)
	}
}
