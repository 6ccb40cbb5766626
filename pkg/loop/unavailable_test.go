package loop_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

// outage is the error a store returns once its retries ran out during a
// broker outage: it names the operation and matches loop.ErrUnavailable.
func outage(op string) error {
	return fmt.Errorf("store: %s r1: timeout: %w", op, loop.ErrUnavailable)
}

// flakyCheckpointer fails every Append after the first okAppends with an
// outage (and Load when failLoad is set).
type flakyCheckpointer struct {
	*loop.MemoryCheckpointer
	okAppends int32
	appends   atomic.Int32
	failLoad  bool
}

func (c *flakyCheckpointer) Load(ctx context.Context, runID string) (*loop.Snapshot, error) {
	if c.failLoad {
		return nil, outage("checkpoint load")
	}
	return c.MemoryCheckpointer.Load(ctx, runID)
}

func (c *flakyCheckpointer) Append(ctx context.Context, runID string, w loop.CheckpointWrite) (uint64, error) {
	if c.appends.Add(1) > c.okAppends {
		return 0, outage("checkpoint append")
	}
	return c.MemoryCheckpointer.Append(ctx, runID, w)
}

// downMailbox is a durable mailbox whose Peek finds the store down.
type downMailbox struct{ *loop.MemoryMailbox }

func (downMailbox) Peek(context.Context) ([]loop.MailMessage, error) {
	return nil, outage("mailbox peek")
}
func (downMailbox) Ack(context.Context, []string) error { return nil }

// downSession is a session store whose reads find the store down.
type downSession struct{ *loop.MemorySession }

func (downSession) Segments(context.Context, string) ([]loop.Segment, error) {
	return nil, outage("session read")
}

// TestUnavailableStoreInterruptsTheRun: when the checkpointer, the mailbox
// or the session store fails with an error matching loop.ErrUnavailable,
// the run stops without a terminal event (no run_failed for a broker
// outage), Result returns that error, and the last checkpoint stays
// resumable ("running", not "failed").
func TestUnavailableStoreInterruptsTheRun(t *testing.T) {
	t.Parallel()
	script := func() *scripted.Provider {
		return scripted.New([]scripted.Step{scripted.CallTool("noop", nil, "c1"), scripted.Text("done")})
	}
	for _, tc := range []struct {
		name string
		// opts returns the run options and the checkpointer to inspect.
		opts       func() ([]loop.RunOption, *flakyCheckpointer)
		wantStored loop.RunStatus // "" when nothing may be stored
	}{
		{"checkpoint append after the first turn", func() ([]loop.RunOption, *flakyCheckpointer) {
			cp := &flakyCheckpointer{MemoryCheckpointer: loop.NewMemoryCheckpointer(), okAppends: 1}
			return []loop.RunOption{loop.WithCheckpoint(cp, "r1")}, cp
		}, loop.StatusRunning},
		{"checkpoint load before the start", func() ([]loop.RunOption, *flakyCheckpointer) {
			cp := &flakyCheckpointer{MemoryCheckpointer: loop.NewMemoryCheckpointer(), failLoad: true}
			return []loop.RunOption{loop.WithCheckpoint(cp, "r1")}, cp
		}, ""},
		{"mailbox peek", func() ([]loop.RunOption, *flakyCheckpointer) {
			cp := &flakyCheckpointer{MemoryCheckpointer: loop.NewMemoryCheckpointer(), okAppends: 100}
			return []loop.RunOption{loop.WithCheckpoint(cp, "r1"), loop.WithMailbox(downMailbox{loop.NewMemoryMailbox()})}, cp
		}, ""},
		{"session read", func() ([]loop.RunOption, *flakyCheckpointer) {
			cp := &flakyCheckpointer{MemoryCheckpointer: loop.NewMemoryCheckpointer(), okAppends: 100}
			return []loop.RunOption{loop.WithCheckpoint(cp, "r1"), loop.WithSession(downSession{loop.NewMemorySession()}, "s1")}, cp
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts, cp := tc.opts()
			evs, res, err := stream(t, agentWith(script(), noopTool()), "go", opts...)
			require.ErrorIs(t, err, loop.ErrUnavailable, "Result returns the store's error")
			require.Nil(t, res)
			for _, ev := range evs {
				require.False(t, loop.IsTerminal(ev), "no terminal event for an outage, got %T in %v", ev, sig(evs))
			}
			snap, lerr := cp.MemoryCheckpointer.Load(context.Background(), "r1")
			if tc.wantStored == "" {
				if lerr == nil {
					require.NotEqual(t, loop.StatusFailed, snap.Status, "an outage never stores a failed head")
				}
				return
			}
			require.NoError(t, lerr)
			require.Equal(t, tc.wantStored, snap.Status, "the last checkpoint stays resumable")
		})
	}
}

// TestUnavailableIsNotAboutTheRun: an error that does not match
// ErrUnavailable still ends the run with run_failed.
func TestUnavailableIsNotAboutTheRun(t *testing.T) {
	t.Parallel()
	cp := &failingCheckpointer{MemoryCheckpointer: loop.NewMemoryCheckpointer()}
	evs, _, err := stream(t, agentWith(scripted.New([]scripted.Step{scripted.Text("done")})), "go", loop.WithCheckpoint(cp, "r1"))
	require.Error(t, err)
	require.NotErrorIs(t, err, loop.ErrUnavailable)
	_, ok := terminal(t, evs).(*loop.RunFailed)
	require.True(t, ok, "a store error about the run itself still fails it: %v", sig(evs))
}

type failingCheckpointer struct{ *loop.MemoryCheckpointer }

func (c *failingCheckpointer) Append(context.Context, string, loop.CheckpointWrite) (uint64, error) {
	return 0, fmt.Errorf("store: checkpoint append r1: value too large")
}
