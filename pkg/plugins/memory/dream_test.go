package memory_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
	"github.com/lovia-fleet/lovia/pkg/plugins/memory"
)

func dreamWorker(t *testing.T, st memory.Store, every int, model loop.Provider) memWorker {
	t.Helper()
	var mu sync.Mutex
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	p, err := memory.New(memory.Config{Store: st, MaxNotes: 3, DreamEvery: every, DreamModel: model, Logger: slog.New(slog.DiscardHandler), Now: func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		clock = clock.Add(time.Second)
		return clock
	}})
	require.NoError(t, err)
	return memWorker{p: p, runner: loop.NewRunner(loop.RunnerConfig{})}
}

// remember is a script that remembers texts, one call per turn (in
// order), then answers.
func remember(texts ...string) []scripted.Step {
	var steps []scripted.Step
	for i, s := range texts {
		steps = append(steps, scripted.CallTool(memory.RememberTool, map[string]string{"text": s}, "m"+string(rune('a'+i))))
	}
	return append(steps, scripted.Text("Noted."))
}

func records(t *testing.T, st memory.Store, kind memory.Kind) map[string]string {
	t.Helper()
	recs, err := st.List(context.Background(), "session:s1", kind)
	require.NoError(t, err)
	out := map[string]string{}
	for _, r := range recs {
		out[r.ID] = r.Text
	}
	return out
}

// The dream, memory's periodic curation: every DreamEvery-th completed run
// of a scope rewrites the scope's notes with a model, once for the whole
// fleet, and never loses a note.
func TestDream(t *testing.T) {
	t.Parallel()
	stores := map[string]func(t *testing.T) (memory.Store, memory.Store){
		"in_process": func(*testing.T) (memory.Store, memory.Store) { s := memory.NewMemoryStore(); return s, s },
		"jetstream_kv_two_connections": func(t *testing.T) (memory.Store, memory.Store) {
			srv := startJS(t)
			return kvStore(t, srv), kvStore(t, srv)
		},
	}
	for name, newStores := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()

			t.Run("rewrites_the_notes_once_per_epoch", func(t *testing.T) {
				t.Parallel()
				st1, st2 := newStores(t)
				dreamer := scripted.New([]scripted.Step{scripted.Text("Here they are:\n- [x1] Likes tea a lot.\n- Lives in Lyon. (written 2026-01-02)\n- Lives in Lyon.")})
				w1 := dreamWorker(t, st1, 2, dreamer)
				w1.run(t, remember("Likes tea."), "I like tea", loop.WithSession(loop.NewMemorySession(), "s1"), loop.WithCheckpoint(loop.NewMemoryCheckpointer(), "r1"))
				require.Zero(t, dreamer.Calls(), "one archived run: no dream yet")
				require.Len(t, records(t, st2, memory.KindNote), 1)

				w1.run(t, remember("Likes tea a lot.", "Lives in Lyon."), "I moved", loop.WithSession(loop.NewMemorySession(), "s1"), loop.WithCheckpoint(loop.NewMemoryCheckpointer(), "r2"))
				require.Equal(t, 1, dreamer.Calls(), "the second archived run dreams")
				req := dreamer.Requests()[0]
				require.Contains(t, req.Entries[0].Content, "into at most 3 notes")
				require.Equal(t, "The notes, oldest first:\n- Likes tea. (written 2026-01-02)\n- Likes tea a lot. (written 2026-01-02)\n- Lives in Lyon. (written 2026-01-02)", req.Entries[1].Content)
				require.Empty(t, req.Tools)

				// The rewrite replaced the notes (the ones it kept keep their
				// ids); the note it dropped is retired, not lost.
				require.Equal(t, map[string]string{
					memory.NoteID("Likes tea a lot."): "Likes tea a lot.",
					memory.NoteID("Lives in Lyon."):   "Lives in Lyon.",
				}, records(t, st2, memory.KindNote))
				require.Equal(t, map[string]string{memory.NoteID("Likes tea."): "Likes tea."}, records(t, st2, memory.KindRetired))
				require.Equal(t, map[string]string{"1": "rewrote 3 notes into 2 (1 retired)"}, records(t, st2, memory.KindDream))

				// The next run, on another worker, sees the rewrite in its
				// system prompt, in the rewrite's order; recall still finds the
				// retired note.
				w2 := dreamWorker(t, st2, 2, dreamer)
				next, res := w2.run(t, []scripted.Step{
					scripted.CallTool(memory.RecallTool, map[string]string{"query": "tea"}, "q1"),
					scripted.Text("ok"),
				}, "tea?", loop.WithSession(loop.NewMemorySession(), "s1"), loop.WithCheckpoint(loop.NewMemoryCheckpointer(), "r3"))
				require.Contains(t, next.Requests()[0].Entries[0].Content, "Your notes, oldest first:\n- ["+memory.NoteID("Likes tea a lot.")+"] Likes tea a lot.\n- ["+memory.NoteID("Lives in Lyon.")+"] Lives in Lyon.")
				require.NotContains(t, next.Requests()[0].Entries[0].Content, "] Likes tea.\n")
				require.Contains(t, toolOutputs(res.Entries)[0], "(retired, 2026-01-02) Likes tea.")
				require.Equal(t, 1, dreamer.Calls(), "three archived runs: still epoch 1")

				// r2 completing again (a resume that re-ran its last turn)
				// rewrites its archive: the count and the epoch are unchanged,
				// no second dream.
				w2.run(t, []scripted.Step{scripted.Text("Noted.")}, "I moved", loop.WithSession(loop.NewMemorySession(), "s1"), loop.WithCheckpoint(loop.NewMemoryCheckpointer(), "r2"))
				require.Equal(t, 1, dreamer.Calls())
			})

			t.Run("concurrent_completions_dream_once", func(t *testing.T) {
				t.Parallel()
				st1, st2 := newStores(t)
				d1 := scripted.New([]scripted.Step{scripted.Text("- One.\n- Two.")})
				d2 := scripted.New([]scripted.Step{scripted.Text("- One.\n- Two.")})
				w1, w2 := dreamWorker(t, st1, 2, d1), dreamWorker(t, st2, 2, d2)
				var wg sync.WaitGroup
				for i, w := range []memWorker{w1, w2} {
					wg.Add(1)
					go func() {
						defer wg.Done()
						w.run(t, remember("Note of run "+string(rune('A'+i))+"."), "hi", loop.WithSession(loop.NewMemorySession(), "s1"), loop.WithCheckpoint(loop.NewMemoryCheckpointer(), "c"+string(rune('1'+i))))
					}()
				}
				wg.Wait()
				require.Equal(t, 1, d1.Calls()+d2.Calls(), "exactly one of the two workers dreams")
				require.Equal(t, map[string]string{"1": "rewrote 2 notes into 2 (2 retired)"}, records(t, st1, memory.KindDream))
			})

			t.Run("a_doubtful_rewrite_changes_nothing", func(t *testing.T) {
				t.Parallel()
				for _, tc := range []struct {
					name, answer, outcome string
				}{
					{"no_list", "I merged them for you.", `failed: the rewrite has no notes (no line starts with "- "); notes unchanged`},
					{"over_max_notes", "- A.\n- B.\n- C.\n- D.", "failed: the rewrite has 4 notes, over max_notes 3; notes unchanged"},
				} {
					st, _ := newStores(t)
					dreamer := scripted.New([]scripted.Step{scripted.Text(tc.answer)})
					w := dreamWorker(t, st, 1, dreamer)
					w.run(t, remember("Likes tea.", "Likes coffee."), "hi", loop.WithSession(loop.NewMemorySession(), "s1"), loop.WithCheckpoint(loop.NewMemoryCheckpointer(), "d-"+tc.name))
					require.Equal(t, 1, dreamer.Calls(), tc.name)
					require.Len(t, records(t, st, memory.KindNote), 2, tc.name)
					require.Empty(t, records(t, st, memory.KindRetired), tc.name)
					require.Equal(t, map[string]string{"1": tc.outcome}, records(t, st, memory.KindDream), tc.name)
				}
				// A model that fails: the same.
				st, _ := newStores(t)
				broken := scripted.New(nil)
				w := dreamWorker(t, st, 1, broken)
				w.run(t, remember("Likes tea.", "Likes coffee."), "hi", loop.WithSession(loop.NewMemorySession(), "s1"), loop.WithCheckpoint(loop.NewMemoryCheckpointer(), "d-broken"))
				require.Len(t, records(t, st, memory.KindNote), 2)
				require.Equal(t, map[string]string{"1": "failed: model call failed; notes unchanged"}, records(t, st, memory.KindDream))
			})
		})
	}
	_, err := memory.New(memory.Config{Store: memory.NewMemoryStore(), DreamEvery: -1})
	require.ErrorContains(t, err, "DreamEvery -1 is negative")
}

// Curation at write time: a note that says what a note of the scope
// already says is not written twice, whichever run remembers it.
func TestRememberTheSameTwiceKeepsOneNote(t *testing.T) {
	t.Parallel()
	st := memory.NewMemoryStore()
	w := newWorker(t, st, memory.BySession)
	_, res := w.run(t, []scripted.Step{scripted.CallTool(memory.RememberTool, map[string]string{"text": "Likes tea."}, "m1"), scripted.Text("ok")},
		"hi", loop.WithSession(loop.NewMemorySession(), "s1"), loop.WithCheckpoint(loop.NewMemoryCheckpointer(), "r1"))
	id := memory.NoteID("Likes tea.")
	require.Equal(t, []string{"Remembered (id " + id + ")."}, toolOutputs(res.Entries))
	_, res = w.run(t, []scripted.Step{scripted.CallTool(memory.RememberTool, map[string]string{"text": "likes  TEA"}, "m1"), scripted.Text("ok")},
		"hi", loop.WithSession(loop.NewMemorySession(), "s1"), loop.WithCheckpoint(loop.NewMemoryCheckpointer(), "r2"))
	require.Equal(t, []string{"Already remembered (id " + id + ")."}, toolOutputs(res.Entries))
	require.Equal(t, map[string]string{id: "Likes tea."}, records(t, st, memory.KindNote))
}
