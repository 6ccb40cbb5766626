package loop_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

// peekMailbox is a durable-style mailbox: Peek reads, Ack deletes; failAck
// simulates a crash between the checkpoint and the ack.
type peekMailbox struct {
	*loop.MemoryMailbox
	mu      sync.Mutex
	failAck bool
}

func (p *peekMailbox) Peek(ctx context.Context) ([]loop.MailMessage, error) {
	msgs, err := p.MemoryMailbox.Drain(ctx)
	for _, m := range msgs {
		_, _ = p.MemoryMailbox.Push(ctx, m) // put back: peeking takes nothing
	}
	return msgs, err
}

func (p *peekMailbox) Ack(ctx context.Context, tokens []string) error {
	p.mu.Lock()
	fail := p.failAck
	p.mu.Unlock()
	if fail {
		return errCrash
	}
	for _, t := range tokens {
		_, _ = p.Remove(ctx, t)
	}
	return nil
}

func injected(entries []loop.Entry, content string) int {
	n := 0
	for _, e := range entries {
		if e.Kind == loop.KindInput && e.Content == content {
			n++
		}
	}
	return n
}

// A steering message is applied exactly once across a crash: lost neither
// when the process dies before the checkpoint (it is still queued) nor
// duplicated when it dies after the checkpoint but before the ack.
func TestDurableMailboxExactlyOnce(t *testing.T) {
	ctx := context.Background()
	steps := []scripted.Step{scripted.CallTool("noop", nil, "c1"), scripted.Text("done")}

	t.Run("crash_after_checkpoint_before_ack", func(t *testing.T) {
		mb := &peekMailbox{MemoryMailbox: loop.NewMemoryMailbox(), failAck: true}
		_, err := mb.Push(ctx, loop.MailMessage{Content: "steer"})
		require.NoError(t, err)
		cp := loop.NewMemoryCheckpointer()
		// The first process drains (checkpoints the message) and then dies
		// after the model turn.
		crashing := &crashingCheckpointer{Checkpointer: cp, allow: 2}
		_, err = newRunner().Run(ctx, agentWith(scripted.New(steps), noopTool()), []loop.Entry{loop.UserText("go")},
			loop.WithCheckpoint(crashing, "r1"), loop.WithMailbox(mb))
		require.ErrorIs(t, err, errCrash)
		mb.mu.Lock()
		mb.failAck = false
		mb.mu.Unlock()
		res, err := newRunner().Run(ctx, agentWith(scripted.New(steps), noopTool()), []loop.Entry{loop.UserText("go")},
			loop.WithCheckpoint(cp, "r1"), loop.WithMailbox(mb))
		require.NoError(t, err)
		require.Equal(t, 1, injected(res.Entries, "steer"), "applied once: %v", entrySigs(res.Entries))
		left, _ := mb.Peek(ctx)
		require.Empty(t, left, "acked after the resume")
	})

	t.Run("crash_before_checkpoint", func(t *testing.T) {
		mb := &peekMailbox{MemoryMailbox: loop.NewMemoryMailbox()}
		_, err := mb.Push(ctx, loop.MailMessage{Content: "steer"})
		require.NoError(t, err)
		cp := loop.NewMemoryCheckpointer()
		// Dies at the checkpoint that would have held the message.
		_, err = newRunner().Run(ctx, agentWith(scripted.New(steps), noopTool()), []loop.Entry{loop.UserText("go")},
			loop.WithCheckpoint(&crashingCheckpointer{Checkpointer: cp, allow: 0}, "r1"), loop.WithMailbox(mb))
		require.ErrorIs(t, err, errCrash)
		left, _ := mb.Peek(ctx)
		require.Len(t, left, 1, "not lost: still queued")
		res, err := newRunner().Run(ctx, agentWith(scripted.New(steps), noopTool()), []loop.Entry{loop.UserText("go")},
			loop.WithCheckpoint(cp, "r1"), loop.WithMailbox(mb))
		require.NoError(t, err)
		require.Equal(t, 1, injected(res.Entries, "steer"))
		require.True(t, strings.HasPrefix(entrySigs(res.Entries)[1], "In(user,steer"))
	})
}
