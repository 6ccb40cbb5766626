package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/lifecycle"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// TestRejectedCopyEndsTheSubmission: a queued first submission has two
// copies of its request in the runs stream (the API republished it under a
// requeue id after a lost reply or past half the dedup window), and one of
// them is invalid. Whatever the order, the run ends with exactly one
// terminal event and a status that agrees with it:
//   - invalid copy first, the valid copy's sequence never recorded: the
//     reject fails the submission and the valid copy is stale (before the
//     fix it ran the failed run: run_failed then run_completed);
//   - invalid copy first, the valid copy's sequence recorded by the API:
//     the invalid one is superseded and terminated without failing the
//     run, which completes from its recorded request;
//   - valid copy first: it completes, and the invalid one leaves it alone.
func TestRejectedCopyEndsTheSubmission(t *testing.T) {
	t.Parallel()
	// One agent, so the worker's one slot is never held by another
	// agent's fetch.
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: `
agents:
  - name: calc
    model: scripted
    tools: [echo]
    script:
      - call: {name: echo, args: {text: "84"}, id: c1}
      - text: The answer is 84.
`, Workers: -1})
	ctx := context.Background()
	names, err := bus.NewNames("")
	require.NoError(t, err)
	valid := func(id string) []byte {
		b, err := bus.Marshal(bus.JSON, &bus.RunRequest{RunID: id, Agent: "calc", Input: bus.TextInput("x"), Encoding: bus.JSON})
		require.NoError(t, err)
		return b
	}
	invalid := func(id string) []byte { return fmt.Appendf(nil, `{"run_id":%q,"input":"x","max_turns":-1}`, id) }
	publish := func(id string, body []byte, suffix string) uint64 {
		seq, err := bus.PublishRequest(ctx, f.JS, names, "calc", body,
			bus.RequestMeta{RunID: id, ContentType: bus.JSON.ContentType(), Submission: 1, Suffix: suffix})
		require.NoError(t, err)
		return seq
	}
	// queue indexes the run as the API does, publishes its first copy,
	// then requeues it (a second copy under a requeue id), recording the
	// second copy's sequence when record is set.
	queue := func(id string, first, second []byte, record bool) {
		_, err := f.Store.Runs().Create(ctx, lifecycle.Submit(lifecycle.Submission{RunID: id, Agent: "calc"}))
		require.NoError(t, err)
		publish(id, first, "")
		e, err := f.Store.Runs().Get(ctx, id)
		require.NoError(t, err)
		e.Record, err = lifecycle.Requeue(e.Record)
		require.NoError(t, err)
		require.NoError(t, f.Store.Runs().Update(ctx, e))
		seq := publish(id, second, ".requeue1")
		if record {
			e, err = f.Store.Runs().Get(ctx, id)
			require.NoError(t, err)
			e.Record, err = lifecycle.RecordRequest(e.Record, seq)
			require.NoError(t, err)
			require.NoError(t, f.Store.Runs().Update(ctx, e))
		}
	}
	queue("rejected-unrecorded", invalid("rejected-unrecorded"), valid("rejected-unrecorded"), false)
	queue("rejected-superseded", invalid("rejected-superseded"), valid("rejected-superseded"), true)
	queue("valid-first", valid("valid-first"), invalid("valid-first"), false)
	want := []struct {
		id     string
		status store.RunStatus
	}{
		{"rejected-unrecorded", store.RunFailed},
		{"rejected-superseded", store.RunCompleted},
		{"valid-first", store.RunCompleted},
	}

	// One run at a time: the copies are handled in stream order.
	f.StartWorker(withConfig(workerConfig(t, f, "w1"), func(c *worker.Config) { c.Concurrency = 1 }))
	// Once every copy is settled, nothing more is published.
	waitIdle(t, f, 30*time.Second)
	for _, w := range want {
		id, status := w.id, w.status
		t.Run(id, func(t *testing.T) {
			envs := runEvents(t, f, id)
			checkOneSubmission(t, id, envs)
			e, err := f.Store.Runs().Get(ctx, id)
			require.NoError(t, err)
			require.Equal(t, status, e.Record.Status, "run %s: events %v", id, fleettest.Types(envs))
			last := envs[len(envs)-1]
			if status == store.RunFailed {
				rf := fleettest.Event[*loop.RunFailed](t, last)
				require.Equal(t, bus.TypeInvalidRequest, rf.Error.Type, "run %s", id)
				require.NotNil(t, e.Record.Error, "run %s", id)
				require.Equal(t, rf.Error.Type, e.Record.Error.Type, "run %s", id)
			} else {
				require.Equal(t, loop.EventRunCompleted, last.Type, "run %s: %v", id, fleettest.Types(envs))
			}
		})
	}
}
