package store

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

// A keyed push is stored once per run and key, whatever happens to the
// message afterwards: queued, peeked and acked, drained, or withdrawn, a
// second push with the key stores nothing and answers the first token.
func TestMailboxPushKey(t *testing.T) {
	t.Parallel()
	_, st := newStore(t, Config{})

	t.Run("OncePerKeyThroughEveryEnd", func(t *testing.T) {
		ctx := t.Context()
		mb, err := st.Mailbox("run-key")
		require.NoError(t, err)
		ends := map[string]func(tok string){
			"acked": func(tok string) {
				msgs, err := mb.Peek(ctx)
				require.NoError(t, err)
				require.Equal(t, []string{"acked"}, contents(msgs))
				require.NoError(t, mb.Ack(ctx, []string{tok}))
			},
			"drained": func(string) {
				msgs, err := mb.Drain(ctx)
				require.NoError(t, err)
				require.Equal(t, []string{"drained"}, contents(msgs))
			},
			"withdrawn": func(tok string) {
				removed, err := mb.Remove(ctx, tok)
				require.NoError(t, err)
				require.True(t, removed)
			},
		}
		for name, end := range ends {
			key := "subagent:" + name
			tok, err := mb.PushKey(ctx, key, loop.MailMessage{Content: name})
			require.NoError(t, err)
			require.Equal(t, KeyToken(key), tok)
			again, err := mb.PushKey(ctx, key, loop.MailMessage{Content: name + " again"})
			require.NoError(t, err)
			require.Equal(t, tok, again, "a queued key answers its token")
			end(tok)
			after, err := mb.PushKey(ctx, key, loop.MailMessage{Content: name + " after"})
			require.NoError(t, err)
			require.Equal(t, tok, after, "a %s key answers its token", name)
			msgs, err := mb.Peek(ctx)
			require.NoError(t, err)
			require.Empty(t, msgs, "the key was %s: nothing is queued again", name)
			removed, err := mb.Remove(ctx, tok)
			require.NoError(t, err)
			require.False(t, removed, "a %s message is not withdrawable", name)
		}
		// Unkeyed pushes are unaffected: an acked one leaves no key.
		tok, err := mb.Push(ctx, loop.MailMessage{Content: "plain"})
		require.NoError(t, err)
		_, err = mb.Peek(ctx)
		require.NoError(t, err)
		require.NoError(t, mb.Ack(ctx, []string{tok}))
		left := keys(t, st, st.mailbox, "run-key.>")
		require.Len(t, left, 3, "one spent record per key, nothing else: %v", left)

		// The spent records go with the run's mailbox.
		require.NoError(t, mb.Clear(ctx))
		require.Empty(t, keys(t, st, st.mailbox, "run-key.>"))
	})

	t.Run("LargeKeyedMessageLeavesNoChunks", func(t *testing.T) {
		ctx := t.Context()
		mb, err := st.Mailbox("run-key-large")
		require.NoError(t, err)
		img := strings.Repeat("QUJD", 1<<19) // 2 MiB of base64
		tok, err := mb.PushKey(ctx, "big", loop.MailMessage{Content: "see attached", Parts: []loop.Part{{Type: loop.PartImage, Data: img, MimeType: "image/png"}}})
		require.NoError(t, err)
		_, err = mb.PushKey(ctx, "big", loop.MailMessage{Content: "see attached", Parts: []loop.Part{{Type: loop.PartImage, Data: img, MimeType: "image/png"}}})
		require.NoError(t, err)
		msgs, err := mb.Peek(ctx)
		require.NoError(t, err)
		require.Len(t, msgs, 1)
		require.Equal(t, img, msgs[0].Parts[0].Data)
		require.NoError(t, mb.Ack(ctx, []string{tok}))
		require.Equal(t, []string{"run-key-large.m." + tok}, keys(t, st, st.mailbox, "run-key-large.>"), "only the spent record stays: no chunks")
	})

	t.Run("KeysAreValidated", func(t *testing.T) {
		ctx := t.Context()
		mb, err := st.Mailbox("run-key-v")
		require.NoError(t, err)
		_, err = mb.PushKey(ctx, "", loop.MailMessage{Content: "x"})
		require.ErrorIs(t, err, ErrInvalidArgument)
		_, err = mb.PushKey(ctx, strings.Repeat("k", MaxKeyLen+1), loop.MailMessage{Content: "x"})
		require.ErrorIs(t, err, ErrInvalidArgument)
		require.ErrorContains(t, err, "the idempotency key must be 1-256 bytes (it is 257)")
		// Any characters: the token is derived, always a valid id.
		tok, err := mb.PushKey(ctx, "subagent:01J/ü *>.", loop.MailMessage{Content: "x"})
		require.NoError(t, err)
		require.Regexp(t, `^k-[0-9a-f]{32}$`, tok)
		require.NotEqual(t, KeyToken("a"), KeyToken("b"))
	})
}

// Pushes with one key from many goroutines on two connections (two
// processes, say: the watcher of a dead worker and its successor's) store
// one message, and all of them answer its token.
func TestMailboxPushKeyConcurrent(t *testing.T) {
	t.Parallel()
	srv, st := newStore(t, Config{})
	other := srv.open(t)
	ctx := t.Context()
	const per = 8
	tokens := make(chan string, 2*per)
	var wg sync.WaitGroup
	for _, s := range []*Store{st, other} {
		mb, err := s.Mailbox("run-race")
		require.NoError(t, err)
		for i := range per {
			wg.Go(func() {
				tok, err := mb.PushKey(ctx, "subagent:child-1", loop.MailMessage{Content: "report " + string(rune('a'+i))})
				if err != nil {
					t.Error(err)
					return
				}
				tokens <- tok
			})
		}
	}
	wg.Wait()
	close(tokens)
	for tok := range tokens {
		require.Equal(t, KeyToken("subagent:child-1"), tok)
	}
	require.Equal(t, []string{"run-race.m." + KeyToken("subagent:child-1")}, keys(t, st, st.mailbox, "run-race.>"), "one entry")
	mb, err := st.Mailbox("run-race")
	require.NoError(t, err)
	msgs, err := mb.Drain(ctx)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
}

// A keyed message folded into the transcript is folded once, across a
// crash between the checkpoint and the Ack, a resume elsewhere, and a
// second delivery of the same report after the resume acked it.
func TestMailboxKeyedFoldedOnceAcrossResume(t *testing.T) {
	t.Parallel()
	srv, st := newStore(t, Config{})
	ctx := t.Context()
	const run, key = "run-fold", "subagent:child-9"
	mb, err := st.Mailbox(run)
	require.NoError(t, err)
	tok, err := mb.PushKey(ctx, key, loop.MailMessage{Content: "<report>7 files</report>"})
	require.NoError(t, err)

	// The first worker peeked the message, folded it into turn 1 and
	// checkpointed that; it died before acking.
	msgs, err := mb.Peek(ctx)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	_, err = st.Checkpointer().Append(ctx, run, loop.CheckpointWrite{
		Entries: []loop.Entry{loop.UserText("go"), {Kind: loop.KindInput, Role: loop.RoleUser, Content: msgs[0].Content, ID: msgs[0].Token}},
		Head:    loop.RunHead{Agent: "lead", Turns: 1, Status: loop.StatusRunning},
	})
	require.NoError(t, err)
	// The first worker's watcher delivers the report again before dying.
	again, err := mb.PushKey(ctx, key, loop.MailMessage{Content: "<report>7 files</report>"})
	require.NoError(t, err)
	require.Equal(t, tok, again)

	// A second worker (its own connection) resumes the run.
	st2 := srv.open(t)
	mb2, err := st2.Mailbox(run)
	require.NoError(t, err)
	model := scripted.New([]scripted.Step{scripted.Text("one more turn"), scripted.Text("done")})
	runner := loop.NewRunner(loop.RunnerConfig{})
	_, err = runner.Run(ctx, &loop.Agent{Name: "lead", Provider: model}, nil, loop.WithCheckpoint(st2.Checkpointer(), run), loop.WithMailbox(mb2))
	require.NoError(t, err)
	reqs := model.Requests()
	require.NotEmpty(t, reqs)
	require.Equal(t, 1, countInput(reqs[0].Entries, "<report>7 files</report>"), "the resumed run holds the report once")

	// The resumed run acked it: the key is spent. The successor's watcher
	// delivering the report once more stores nothing.
	third, err := mb2.PushKey(ctx, key, loop.MailMessage{Content: "<report>7 files</report>"})
	require.NoError(t, err)
	require.Equal(t, tok, third)
	left, err := mb2.Peek(ctx)
	require.NoError(t, err)
	require.Empty(t, left, "nothing left to fold")
	snap, err := st2.Checkpointer().Load(ctx, run)
	require.NoError(t, err)
	require.Equal(t, 1, countInput(snap.Entries, "<report>7 files</report>"), "the transcript holds the report once")
}

func countInput(entries []loop.Entry, content string) int {
	n := 0
	for _, e := range entries {
		if e.Kind == loop.KindInput && e.ContentText() == content {
			n++
		}
	}
	return n
}
