package memory_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
	"github.com/lovia-fleet/lovia/pkg/plugins/memory"
)

// TestConcurrentRemembersWriteOneNote: runs of one user on several
// workers at once (a user scope is not one session, so nothing orders
// them) that remember the same fact, in their own wording of case and
// spacing, leave one note; each is told it is remembered, under its id.
func TestConcurrentRemembersWriteOneNote(t *testing.T) {
	t.Parallel()
	srv := startJS(t)
	const runs = 12
	var wg sync.WaitGroup
	outs := make([]string, runs)
	for i := range runs {
		// One worker (plugin and store connection) per run.
		w := newWorker(t, kvStore(t, srv), memory.ByUser)
		text := "Likes green tea."
		if i%2 == 1 {
			text = "likes  green tea"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			model := scripted.New([]scripted.Step{
				scripted.CallTool(memory.RememberTool, map[string]string{"text": text}, "m1"),
				scripted.Text("ok"),
			})
			a := &loop.Agent{Name: "a", Provider: model}
			memory.Attach(a, w.p)
			res, err := w.runner.Run(context.Background(), a, []loop.Entry{loop.UserText("hi")},
				loop.WithMetadata(map[string]any{"user_id": "u1"}), loop.WithCheckpoint(loop.NewMemoryCheckpointer(), fmt.Sprintf("run%d", i)))
			if err == nil {
				outs[i] = toolOutputs(res.Entries)[0]
			}
		}()
	}
	wg.Wait()
	notes, err := kvStore(t, srv).List(context.Background(), "user:u1", memory.KindNote)
	require.NoError(t, err)
	require.Len(t, notes, 1, "one note: %+v", notes)
	id := notes[0].ID
	for i, out := range outs {
		require.Regexp(t, `^(Already r|R)emembered \(id `+id+`\)\.$`, out, "run %d", i)
	}
}

// TestForgetWhatCannotBeAnID: forget with an id no note can have (dots,
// slashes, wildcards, nothing) tells the model there is no such note, as
// for an unknown id, instead of the store's "invalid key".
func TestForgetWhatCannotBeAnID(t *testing.T) {
	t.Parallel()
	w := newWorker(t, kvStore(t, startJS(t)), memory.BySession)
	w.run(t, []scripted.Step{scripted.CallTool(memory.RememberTool, map[string]string{"text": "Likes tea."}, "m1"), scripted.Text("ok")},
		"hi", loop.WithSession(loop.NewMemorySession(), "s1")) // the bucket exists
	ids := []string{"../x", "a.b", "*", ">", " ", "nope"}
	var calls []scripted.Call
	for i, id := range ids {
		calls = append(calls, scripted.Call{ID: fmt.Sprint("f", i), Name: memory.ForgetTool, Args: map[string]string{"id": id}})
	}
	_, res := w.run(t, []scripted.Step{scripted.Batch(calls...), scripted.Text("ok")}, "forget", loop.WithSession(loop.NewMemorySession(), "s1"))
	outs := toolOutputs(res.Entries)
	require.Len(t, outs, len(ids))
	for i, out := range outs {
		require.Contains(t, out, "no note with id", "forget(%q)", ids[i])
		require.NotContains(t, out, "invalid key", "forget(%q)", ids[i])
	}
}
