package store

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// TestUnquietRacesClaim (issue 16): a claim that read a quiet record and a
// cancel request or mailbox message stored for the run meanwhile never
// both win. Either the Unquiet before the store lands first — the claim's
// compare-and-set on the quiet revision it read then fails, and its retry
// reads the record not quiet — or the claim lands first, and the Unquiet
// finds the record not quiet, writes nothing and lets the store go ahead
// (the run, started without reading, learns of it by the notification and
// its heartbeat's cancel read).
func TestUnquietRacesClaim(t *testing.T) {
	t.Parallel()
	_, st := newStore(t, Config{})
	ctx := t.Context()
	runs := st.Runs()
	claim := func(e *RunEntry) error {
		e.Record.Status, e.Record.Worker, e.Record.Attempt, e.Record.Quiet = RunRunning, "w1", 1, false
		return runs.Update(ctx, e)
	}

	t.Run("CancelFirst", func(t *testing.T) {
		_, err := runs.Create(ctx, RunRecord{RunID: "cancel-first", Agent: "a", Quiet: true})
		require.NoError(t, err)
		read, err := runs.Get(ctx, "cancel-first") // the claim's read
		require.NoError(t, err)
		require.True(t, read.Record.Quiet)
		created, err := st.Control().RequestCancel(ctx, "cancel-first", 1, "stop")
		require.NoError(t, err)
		require.True(t, created)
		require.ErrorIs(t, claim(read), ErrConflict, "a claim won the quiet revision a cancel request had cleared")
		again, err := runs.Get(ctx, "cancel-first")
		require.NoError(t, err)
		require.False(t, again.Record.Quiet, "the cancel request left the record quiet")
		cr, err := st.Control().CancelRequested(ctx, "cancel-first", 1)
		require.NoError(t, err)
		require.NotNil(t, cr)
	})

	t.Run("InjectFirst", func(t *testing.T) {
		_, err := runs.Create(ctx, RunRecord{RunID: "inject-first", Agent: "a", Quiet: true})
		require.NoError(t, err)
		read, err := runs.Get(ctx, "inject-first")
		require.NoError(t, err)
		mb, err := st.Mailbox("inject-first")
		require.NoError(t, err)
		_, err = mb.PushKey(ctx, "k1", loop.MailMessage{Content: "steer"})
		require.NoError(t, err)
		require.ErrorIs(t, claim(read), ErrConflict, "a claim won the quiet revision an inject had cleared")
		again, err := runs.Get(ctx, "inject-first")
		require.NoError(t, err)
		require.False(t, again.Record.Quiet)
		// A keyed repeat (the client's retry) on a record no longer quiet
		// writes no record.
		rev := again.Revision
		_, err = mb.PushKey(ctx, "k1", loop.MailMessage{Content: "steer"})
		require.NoError(t, err)
		again, err = runs.Get(ctx, "inject-first")
		require.NoError(t, err)
		require.Equal(t, rev, again.Revision)
	})

	t.Run("ClaimFirst", func(t *testing.T) {
		_, err := runs.Create(ctx, RunRecord{RunID: "claim-first", Agent: "a", Quiet: true})
		require.NoError(t, err)
		read, err := runs.Get(ctx, "claim-first")
		require.NoError(t, err)
		require.NoError(t, claim(read))
		created, err := st.Control().RequestCancel(ctx, "claim-first", 1, "stop")
		require.NoError(t, err, "a cancel after the claim failed on the record the claim changed")
		require.True(t, created)
		mb, err := st.Mailbox("claim-first")
		require.NoError(t, err)
		_, err = mb.Push(ctx, loop.MailMessage{Content: "steer"})
		require.NoError(t, err)
		after, err := runs.Get(ctx, "claim-first")
		require.NoError(t, err)
		require.Equal(t, read.Revision, after.Revision, "an Unquiet of a record no longer quiet wrote it")
		require.Equal(t, RunRunning, after.Record.Status)
	})

	t.Run("NoRecord", func(t *testing.T) {
		require.NoError(t, runs.Unquiet(ctx, "never-indexed"))
	})
}
