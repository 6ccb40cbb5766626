package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestConfig(t *testing.T) {
	t.Parallel()
	c := Config{}.WithDefaults()
	require.Equal(t, "lovia_checkpoints", c.CheckpointBucket)
	require.Equal(t, "lovia_sessions", c.SessionBucket)
	require.Equal(t, "lovia_mailbox", c.MailboxBucket)
	require.Equal(t, "lovia_runs", c.RunBucket)
	require.Equal(t, 5*time.Second, c.Timeout)
	require.Equal(t, 7*24*time.Hour, c.mailboxMaxAge())
	require.NoError(t, c.validate())

	require.Zero(t, Config{MailboxTTL: -1}.WithDefaults().mailboxMaxAge(), "negative: no TTL")

	for name, bad := range map[string]Config{
		"CheckpointBucket": {CheckpointBucket: "a.b"},
		"RunBucket":        {RunBucket: "lovia_sessions"},
		"Timeout":          {Timeout: -1},
		"ChunkSize":        {ChunkSize: 10},
		"Replicas":         {Replicas: 7},
		"CASRetries":       {CASRetries: -1},
	} {
		err := bad.WithDefaults().validate()
		require.ErrorIs(t, err, ErrInvalidConfig, name)
		require.Contains(t, err.Error(), name, "the error names the field")
	}
}

func TestEnsureBucketsAndOpen(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{}) // EnsureBuckets once
	js := srv.connect(t)
	ctx := t.Context()
	require.NoError(t, EnsureBuckets(ctx, js, Config{}), "idempotent")

	custom := Config{CheckpointBucket: "c2", SessionBucket: "s2", MailboxBucket: "m2", RunBucket: "r2"}
	_, err := Open(ctx, js, custom)
	require.ErrorIs(t, err, ErrBucketNotFound)
	require.Contains(t, err.Error(), `store: open bucket c2: bucket not found`)
	require.NoError(t, EnsureBuckets(ctx, js, custom))
	st, err := Open(ctx, js, custom)
	require.NoError(t, err)
	_, err = st.Checkpointer().Append(ctx, "r1", loopWrite())
	require.NoError(t, err)
	kv, err := js.KeyValue(ctx, "c2")
	require.NoError(t, err)
	_, err = kv.Get(ctx, segKey("r1", 0))
	require.NoError(t, err, "the store writes to the configured bucket")

	_, err = Open(ctx, js, Config{ChunkSize: 2 << 20})
	require.ErrorIs(t, err, ErrInvalidConfig, "a chunk larger than the server's max payload")
}
