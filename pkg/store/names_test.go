package store

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// The default bucket names are constants here, and bus.Names builds every
// name on the wire: they must not drift apart.
func TestDefaultBucketsAreTheBusNames(t *testing.T) {
	t.Parallel()
	var n bus.Names
	require.Equal(t, n.CheckpointsBucket(), DefaultCheckpointBucket)
	require.Equal(t, n.SessionsBucket(), DefaultSessionBucket)
	require.Equal(t, n.MailboxBucket(), DefaultMailboxBucket)
	require.Equal(t, n.RunsBucket(), DefaultRunBucket)
	require.Equal(t, n.ResultsBucket(), DefaultResultBucket)
}
