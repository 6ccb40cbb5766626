package catalog_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// TestScriptedHandoffThroughTheFleet: a scripted agent reached by a
// handoff on a worker plays its own script from its first step (it
// played the run's turn number: "no step 2 in a script of 1"), and one
// handed back to continues its own.
func TestScriptedHandoffThroughTheFleet(t *testing.T) {
	t.Parallel()
	const agents = `
agents:
  - name: triage
    model: scripted
    tools: [echo]
    handoffs: [specialist]
    script:
      - call: {name: echo, args: {text: looking}, id: e1}
      - call: {name: transfer_to_specialist, args: {reason: billing}, id: h1}
      - text: triage is done
  - name: specialist
    model: scripted
    tools: [echo]
    handoffs: [triage]
    script:
      - call: {name: echo, args: {text: on it}, id: e2}
      - call: {name: transfer_to_triage, id: h2}
`
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: agents})
	rep, err := f.Client.Submit(context.Background(), &bus.RunRequest{Agent: "triage", Input: bus.TextInput("my bill")})
	require.NoError(t, err)
	envs := f.Events(rep.RunID, 30*time.Second)
	last := envs[len(envs)-1]
	require.Equal(t, loop.EventRunCompleted, last.Type, "%v: %s", fleettest.Types(envs), last.Data)
	var done struct {
		Output string `json:"output"`
	}
	require.NoError(t, json.Unmarshal(last.Data, &done))
	require.Equal(t, "triage is done", done.Output)
	require.Len(t, fleettest.OfType(envs, loop.EventHandoffOccurred), 2, "%v", fleettest.Types(envs))
}
