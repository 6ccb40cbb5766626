package memory_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
	"github.com/lovia-fleet/lovia/pkg/plugins/memory"
)

// worker is one process's view: its own plugin value over a shared store.
type memWorker struct {
	p      *memory.Plugin
	runner *loop.Runner
}

func newWorker(t *testing.T, st memory.Store, scope memory.ScopeKind) memWorker {
	t.Helper()
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	p, err := memory.New(memory.Config{Store: st, Scope: scope, Logger: slog.New(slog.DiscardHandler), Now: func() time.Time {
		clock = clock.Add(time.Second)
		return clock
	}})
	require.NoError(t, err)
	return memWorker{p: p, runner: loop.NewRunner(loop.RunnerConfig{})}
}

func (w memWorker) run(t *testing.T, steps []scripted.Step, input string, opts ...loop.RunOption) (*scripted.Provider, *loop.RunResult) {
	t.Helper()
	model := scripted.New(steps)
	a := &loop.Agent{Name: "a", Instructions: "Help.", Provider: model}
	memory.Attach(a, w.p)
	var in []loop.Entry
	if input != "" {
		in = []loop.Entry{loop.UserText(input)}
	}
	res, err := w.runner.Run(context.Background(), a, in, opts...)
	require.NoError(t, err)
	return model, res
}

func toolOutputs(es []loop.Entry) []string {
	var out []string
	for _, e := range es {
		if e.Kind == loop.KindToolResult {
			out = append(out, e.Output)
		}
	}
	return out
}

func startJS(t *testing.T) *broker.Embedded {
	t.Helper()
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return srv
}

func kvStore(t *testing.T, srv *broker.Embedded) memory.Store {
	t.Helper()
	nc, err := srv.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return memory.NewKV(js, "lovia_memory", 1)
}

func TestMemory(t *testing.T) {
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

			t.Run("written_by_one_worker_seen_by_another", func(t *testing.T) {
				t.Parallel()
				st1, st2 := newStores(t)
				w1, w2 := newWorker(t, st1, memory.BySession), newWorker(t, st2, memory.BySession)
				sess := loop.NewMemorySession()
				cp := loop.NewMemoryCheckpointer()
				first, res := w1.run(t, []scripted.Step{
					scripted.CallTool(memory.RememberTool, map[string]string{"text": "Prefers tea over coffee."}, "m1"),
					scripted.Text("Noted."),
				}, "I like tea", loop.WithSession(sess, "s1"), loop.WithCheckpoint(cp, "r1"))
				id := memory.NoteID("Prefers tea over coffee.")
				require.Equal(t, []string{"Remembered (id " + id + ")."}, toolOutputs(res.Entries))
				require.NotContains(t, first.Requests()[0].Entries[0].Content, "Prefers tea", "no notes yet at the first run's start")
				require.Contains(t, first.Requests()[0].Entries[0].Content, "You have a memory: remember(text)")

				// Worker 2 continues the session: the note is in its system
				// prompt, and recall finds the note and the first run's archive.
				second, res := w2.run(t, []scripted.Step{
					{Text: "unused"}, {Text: "unused"},
					scripted.CallTool(memory.RecallTool, map[string]string{"query": "tea"}, "q1"),
					scripted.Text("You like tea."),
				}, "What do I drink?", loop.WithSession(sess, "s1"), loop.WithCheckpoint(cp, "r2"))
				require.Contains(t, second.Requests()[0].Entries[0].Content, "Your notes, oldest first:\n- ["+id+"] Prefers tea over coffee.")
				out := toolOutputs(res.Entries)
				require.Len(t, out, 1)
				require.Contains(t, out[0], "(archive, 2026-01-02) run r1: asked \"I like tea\", answered \"Noted.\"")
				require.Contains(t, out[0], "- ["+id+"] (note, 2026-01-02) Prefers tea over coffee.")

				// Another session sees nothing.
				other, _ := w2.run(t, []scripted.Step{scripted.Text("hi")}, "hi", loop.WithSession(loop.NewMemorySession(), "s2"))
				require.NotContains(t, other.Requests()[0].Entries[0].Content, "Prefers tea")

				// forget removes it for everyone.
				_, res = w1.run(t, []scripted.Step{
					{Text: "unused"}, {Text: "unused"}, {Text: "unused"}, {Text: "unused"},
					scripted.CallTool(memory.ForgetTool, map[string]string{"id": id}, "f1"),
					scripted.CallTool(memory.ForgetTool, map[string]string{"id": id}, "f2"),
					scripted.Text("Forgotten."),
				}, "forget it", loop.WithSession(sess, "s1"))
				out = toolOutputs(res.Entries)
				require.Equal(t, "Forgot "+id+".", out[0])
				require.Contains(t, out[1], "no note with id")
				recs, err := st2.List(context.Background(), "session:s1", "")
				require.NoError(t, err)
				for _, r := range recs {
					require.Equal(t, memory.KindArchive, r.Kind, "only archives remain: %+v", r)
				}
			})

			t.Run("resume_and_replay_write_once", func(t *testing.T) {
				t.Parallel()
				st1, st2 := newStores(t)
				cp := loop.NewMemoryCheckpointer()
				// Worker 1 wrote the note, then crashed before saving its
				// result: the call is dangling in the checkpoint.
				w1 := newWorker(t, st1, memory.BySession)
				_, err := w1.p.Tools()[0].Func(context.Background(), &loop.RunContext{RunID: "r9", SessionID: "s9"}, []byte(`{"text":"Lives in Lyon."}`))
				require.NoError(t, err)
				_, err = cp.Append(context.Background(), "r9", loop.CheckpointWrite{
					Entries: []loop.Entry{loop.UserText("I moved to Lyon"), loop.ToolCallEntry("m1", memory.RememberTool, `{"text":"Lives in Lyon."}`)},
					Head:    loop.RunHead{Agent: "a", Turns: 1, Status: loop.StatusRunning},
				})
				require.NoError(t, err)
				// Worker 2 resumes: the call runs again, under the same id.
				w2 := newWorker(t, st2, memory.BySession)
				steps := []scripted.Step{{Text: "unused"}, scripted.Text("Noted.")}
				_, res := w2.run(t, steps, "", loop.WithCheckpoint(cp, "r9"), loop.WithSession(loop.NewMemorySession(), "s9"))
				require.False(t, res.Replayed)
				// And a resubmission replays the completed run.
				_, res = w2.run(t, steps, "", loop.WithCheckpoint(cp, "r9"), loop.WithSession(loop.NewMemorySession(), "s9"))
				require.True(t, res.Replayed)
				recs, err := st1.List(context.Background(), "session:s9", "")
				require.NoError(t, err)
				var kinds []string
				for _, r := range recs {
					kinds = append(kinds, string(r.Kind)+":"+r.ID)
				}
				require.ElementsMatch(t, []string{"note:" + memory.NoteID("Lives in Lyon."), "archive:r9"}, kinds)
				notes, err := st1.List(context.Background(), "session:s9", memory.KindNote)
				require.NoError(t, err)
				require.Len(t, notes, 1, "List filters by kind")
				require.Equal(t, "Lives in Lyon.", notes[0].Text)
			})

			t.Run("user_scope", func(t *testing.T) {
				t.Parallel()
				st, _ := newStores(t)
				w := newWorker(t, st, memory.ByUser)
				_, res := w.run(t, []scripted.Step{
					scripted.CallTool(memory.RememberTool, map[string]string{"text": "Speaks French."}, "m1"),
					scripted.Text("ok"),
				}, "hi", loop.WithSession(loop.NewMemorySession(), "a1"))
				require.Contains(t, toolOutputs(res.Entries)[0], `memory is kept per user and this run has no user id: submit it with metadata {"user_id": "<user id>"}`)
				w.run(t, []scripted.Step{
					scripted.CallTool(memory.RememberTool, map[string]string{"text": "Speaks French."}, "m1"),
					scripted.Text("ok"),
				}, "hi", loop.WithMetadata(map[string]any{"user_id": "ana@example.com"}), loop.WithSession(loop.NewMemorySession(), "a2"))
				// Another session of the same user sees it.
				model, _ := w.run(t, []scripted.Step{scripted.Text("bonjour")}, "hi", loop.WithMetadata(map[string]any{"user_id": "ana@example.com"}), loop.WithSession(loop.NewMemorySession(), "a3"))
				require.Contains(t, model.Requests()[0].Entries[0].Content, "] Speaks French.")
			})
		})
	}
}

func TestNoSessionNoMemory(t *testing.T) {
	t.Parallel()
	w := newWorker(t, memory.NewMemoryStore(), memory.BySession)
	model, res := w.run(t, []scripted.Step{scripted.CallTool(memory.RecallTool, map[string]string{}, "q"), scripted.Text("ok")}, "hi")
	require.Equal(t, "Help.", model.Requests()[0].Entries[0].Content, "no memory section without a scope")
	require.Contains(t, toolOutputs(res.Entries)[0], "memory is kept per session and this run has none: submit it with a session_id")
	_, err := memory.New(memory.Config{Store: memory.NewMemoryStore(), Scope: "team"})
	require.ErrorContains(t, err, `scope "team": use session or user`)
}

func TestScopeToken(t *testing.T) {
	t.Parallel()
	require.Equal(t, "session_s1", memory.ScopeToken("session_s1"))
	tok := memory.ScopeToken("user:ana@example.com")
	require.True(t, strings.HasPrefix(tok, "="))
	require.NotContains(t, tok, ".")
}
