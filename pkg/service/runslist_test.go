package service_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

const parkAgents = `
agents:
  - name: gated
    model: scripted
    tools: [echo]
    approval: [echo]
    approval_timeout: 10m
    script:
      - call: {name: echo, args: {text: "ship it"}, id: c1}
      - text: done
  - name: asker
    model: scripted
    tools: [ask_human]
    approval_timeout: 10m
    script:
      - call: {name: ask_human, args: {question: "Which colour?"}, id: q1}
      - text: thanks
`

// eventually polls cond until it holds, failing after a generous deadline
// with what it waited for.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func steps(d *bus.RunDescription) []string {
	var out []string
	for _, s := range d.Attempts {
		out = append(out, s.Kind)
	}
	return out
}

// A run that parks on its approval is listed as parked and awaiting, with
// the call, the tool and the deadline; its description's history shows
// the claim, the park, the wake and the resume, each with its time, and
// an ask_human question is listed as a question.
func TestListAndDescribeAParkedRun(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: parkAgents, Workers: 2,
		Worker: func(c *worker.Config) { c.ParkAfter = 200 * time.Millisecond }})
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "gated", Input: bus.TextInput("deploy")})
	require.NoError(t, err)
	runID := rep.RunID

	var list *bus.RunsListReply
	eventually(t, "the run to be listed as parked", func() bool {
		list, err = f.API.ListRuns(ctx, &bus.RunsListRequest{Status: []string{"parked"}})
		require.NoError(t, err)
		return len(list.Runs) == 1
	})
	r := list.Runs[0]
	require.Equal(t, runID, r.RunID)
	require.Equal(t, 1, list.Counts.Parked)
	require.NotNil(t, r.Awaiting)
	require.Equal(t, bus.RunAwaiting{Kind: "approval", CallID: "c1", Tool: "echo", Deadline: r.Awaiting.Deadline, Parked: true}, *r.Awaiting)
	require.WithinDuration(t, time.Now().Add(10*time.Minute), r.Awaiting.Deadline, time.Minute)
	aw, err := f.API.ListRuns(ctx, &bus.RunsListRequest{Awaiting: true})
	require.NoError(t, err)
	require.Len(t, aw.Runs, 1)

	d, err := f.API.DescribeRun(ctx, runID)
	require.NoError(t, err)
	require.Equal(t, bus.StateParked, d.Status)
	require.True(t, d.Awaiting.Parked)
	require.Equal(t, []string{"submit", "claim", "park"}, steps(d))

	_, err = f.API.Approve(ctx, runID, &bus.ApproveRequest{CallID: "c1", Decision: loop.Approve})
	require.NoError(t, err)
	eventually(t, "the run to complete after the decision", func() bool {
		d, err = f.API.DescribeRun(ctx, runID)
		require.NoError(t, err)
		return d.Status == bus.StateCompleted
	})
	require.Equal(t, []string{"submit", "claim", "park", "wake", "resume", "complete"}, steps(d))
	for i, s := range d.Attempts {
		require.Equal(t, i+1, s.N)
		require.False(t, s.At.IsZero(), "step %+v has no time", s)
		if i > 0 {
			require.False(t, s.At.Before(d.Attempts[i-1].At), "steps out of order: %+v", d.Attempts)
		}
	}
	require.Nil(t, d.Awaiting)
	require.Equal(t, 1, d.Wakes)
	require.Positive(t, d.DurationMS)

	// ask_human waits are questions, with the question.
	q, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "asker", Input: bus.TextInput("paint it")})
	require.NoError(t, err)
	eventually(t, "the question to be listed", func() bool {
		list, err = f.API.ListRuns(ctx, &bus.RunsListRequest{Awaiting: true})
		require.NoError(t, err)
		return slices.ContainsFunc(list.Runs, func(r bus.RunSummary) bool { return r.RunID == q.RunID && r.Awaiting.Tool != "" })
	})
	i := slices.IndexFunc(list.Runs, func(r bus.RunSummary) bool { return r.RunID == q.RunID })
	require.Equal(t, "question", list.Runs[i].Awaiting.Kind)
	require.Equal(t, "Which colour?", list.Runs[i].Awaiting.Question)
	require.Equal(t, "q1", list.Runs[i].Awaiting.CallID)
}
