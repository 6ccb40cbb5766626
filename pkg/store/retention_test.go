package store

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// storedKeys counts the messages a bucket's stream holds for a run's keys
// matching filter — values, delete markers and expiry markers alike.
func storedKeys(t *testing.T, b *bucket, filter string) int {
	t.Helper()
	info, err := b.stream.Info(t.Context(), jetstream.WithSubjectFilter(b.subject(filter)))
	require.NoError(t, err)
	n := 0
	for _, c := range info.State.Subjects {
		n += int(c)
	}
	return n
}

// leaveRun gives a run the keys a run leaves in the three buckets: a
// record in the given status, two checkpoint segments, a mailbox message
// drained (a delete marker) and one queued, a decision, a cancel
// request and a park timer.
func leaveRun(t *testing.T, st *Store, run string, status RunStatus) {
	t.Helper()
	ctx := t.Context()
	_, err := st.Runs().Create(ctx, RunRecord{RunID: run, Agent: "a"})
	require.NoError(t, err)
	cp := st.Checkpointer()
	rev, err := cp.Append(ctx, run, loop.CheckpointWrite{Entries: turnEntries(1), Head: runHead(1)})
	require.NoError(t, err)
	_, err = cp.Append(ctx, run, loop.CheckpointWrite{Base: 3, Entries: turnEntries(2), Head: runHead(2), Revision: rev})
	require.NoError(t, err)
	mb, err := st.Mailbox(run)
	require.NoError(t, err)
	_, err = mb.Push(ctx, loop.MailMessage{Content: "drained"})
	require.NoError(t, err)
	_, err = mb.Drain(ctx)
	require.NoError(t, err)
	_, err = mb.PushKey(ctx, "k", loop.MailMessage{Content: "queued"})
	require.NoError(t, err)
	_, _, err = st.Control().Decide(ctx, run, 1, "call-1", loop.Approve, "")
	require.NoError(t, err)
	_, err = st.Control().RequestCancel(ctx, run, 1, "")
	require.NoError(t, err)
	_, err = st.Control().SetParkTimer(ctx, run, time.Now().Add(time.Hour))
	require.NoError(t, err)
	if status != RunQueued {
		_, err = st.Runs().Modify(ctx, run, func(r *RunRecord) error { r.Status = status; return nil })
		require.NoError(t, err)
	}
}

// runKeys counts every message the run left, in the three buckets.
func runKeys(t *testing.T, st *Store, run string) int {
	return storedKeys(t, st.checkpoints.b, run+".>") + storedKeys(t, st.mailbox, run+".>") +
		storedKeys(t, st.runs.b, run+".>") + storedKeys(t, st.runs.b, parkKey(run))
}

// TestRetentionExpiresEndedRuns: an ended run's record expires the
// retention age after its last change, and the reaper then removes every
// key the run left (checkpoint, mailbox, control, park timer; the expiry
// marker stays for its own TTL); a queued, running or parked run keeps everything, however old.
func TestRetentionExpiresEndedRuns(t *testing.T) {
	_, st := newStore(t, Config{Retention: time.Second})
	live := map[string]RunStatus{"queued": RunQueued, "running": RunRunning, "parked": RunParked}
	for run, status := range live {
		leaveRun(t, st, run, status)
	}
	leaveRun(t, st, "completed", RunCompleted)
	leaveRun(t, st, "failed", RunFailed)
	before := runKeys(t, st, "queued")
	require.Greater(t, before, 6)

	rp, err := NewReaper(ReaperConfig{Store: st})
	require.NoError(t, err)
	require.NoError(t, rp.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, rp.Stop(context.Background())) })

	deadline := time.Now().Add(30 * time.Second)
	for _, run := range []string{"completed", "failed"} {
		for runKeys(t, st, run) != 1 { // the expiry marker
			require.True(t, time.Now().Before(deadline), "waited 30s for the ended run %s's keys to go; %d remain", run, runKeys(t, st, run))
			time.Sleep(50 * time.Millisecond)
		}
		_, err := st.Runs().Get(t.Context(), run)
		require.ErrorIs(t, err, ErrRunNotFound)
	}
	// The live runs were written before the ended ones: older than the
	// retention age, they keep every key.
	for run, status := range live {
		require.Equal(t, before, runKeys(t, st, run), "run %s (%s) lost keys", run, status)
		e, err := st.Runs().Get(t.Context(), run)
		require.NoError(t, err)
		require.Equal(t, status, e.Record.Status)
	}
}

// TestRetentionResubmitMakesLive: a resubmitted run (queued again) is
// written without a TTL, so it no longer expires; a record written ended
// again expires anew.
func TestRetentionResubmitMakesLive(t *testing.T) {
	_, st := newStore(t, Config{Retention: time.Second})
	ctx := t.Context()
	_, err := st.Runs().Create(ctx, RunRecord{RunID: "r", Agent: "a", Status: RunCompleted})
	require.NoError(t, err)
	_, err = st.Runs().Modify(ctx, "r", func(r *RunRecord) error { r.Status = RunQueued; return nil })
	require.NoError(t, err)
	_, err = st.Runs().Create(ctx, RunRecord{RunID: "ended", Agent: "a", Status: RunFailed})
	require.NoError(t, err)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := st.Runs().Get(ctx, "ended")
		if err != nil {
			require.ErrorIs(t, err, ErrRunNotFound)
			break
		}
		require.True(t, time.Now().Before(deadline), "waited 30s for the failed run's record to expire")
		time.Sleep(50 * time.Millisecond)
	}
	e, err := st.Runs().Get(ctx, "r")
	require.NoError(t, err, "the resubmitted run expired")
	require.Equal(t, RunQueued, e.Record.Status)
}

// TestReapSparesARunSubmittedAgain: a run whose id was submitted again
// after its record expired keeps its new keys when a reaper comes late.
func TestReapSparesARunSubmittedAgain(t *testing.T) {
	_, st := newStore(t, Config{})
	leaveRun(t, st, "again", RunRunning)
	n := runKeys(t, st, "again")
	require.NoError(t, st.Reap(t.Context(), "again"))
	require.Equal(t, n, runKeys(t, st, "again"))
}

// TestRetentionForever: a negative retention writes no TTL.
func TestRetentionForever(t *testing.T) {
	_, st := newStore(t, Config{Retention: -1})
	require.Zero(t, st.runs.ttl(&RunRecord{Status: RunCompleted}))
	_, st = newStore(t, Config{})
	require.Equal(t, DefaultRetention, st.runs.ttl(&RunRecord{Status: RunCompleted}))
	require.Zero(t, st.runs.ttl(&RunRecord{Status: RunParked}))
	_, err := Open(t.Context(), nil, Config{Retention: time.Millisecond})
	require.ErrorIs(t, err, ErrInvalidConfig)
}
