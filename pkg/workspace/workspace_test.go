package workspace_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/workspace"
)

type bundle struct {
	srv *broker.Embedded
	js  jetstream.JetStream
	st  *workspace.Store
}

// setup starts an embedded NATS server with a temporary store.
func setup(t *testing.T) *bundle {
	t.Helper()
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	b := &bundle{srv: srv}
	b.js = b.connect(t)
	b.st, err = workspace.New(workspace.Config{JetStream: b.js})
	require.NoError(t, err)
	return b
}

// connect opens another connection, as another worker would.
func (b *bundle) connect(t *testing.T) jetstream.JetStream {
	nc, err := b.srv.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}

func (b *bundle) tree(t *testing.T, id string, lim workspace.Limits) *workspace.Tree {
	tr, err := b.st.Tree(workspace.Scope{Kind: workspace.BySession, ID: id}, lim)
	require.NoError(t, err)
	return tr
}

func paths(t *testing.T, tr *workspace.Tree) []string {
	es, err := tr.Files(context.Background())
	require.NoError(t, err)
	var out []string
	for _, e := range es {
		out = append(out, e.Path)
	}
	return out
}

func TestTree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("empty tree before any write", func(t *testing.T) {
		t.Parallel()
		tr := setup(t).tree(t, "s1", workspace.Limits{})
		es, err := tr.Files(ctx)
		require.NoError(t, err)
		require.Empty(t, es)
		_, _, err = tr.Read(ctx, "a.txt")
		require.ErrorIs(t, err, workspace.ErrNotFound)
		require.ErrorContains(t, err, "write_file creates a file")
	})

	t.Run("write read list grep delete", func(t *testing.T) {
		t.Parallel()
		tr := setup(t).tree(t, "s1", workspace.Limits{})
		e, err := tr.Write(ctx, "./src//main.go", []byte("package main\n\nfunc main() {}\n"))
		require.NoError(t, err)
		require.Equal(t, "src/main.go", e.Path)
		require.EqualValues(t, 1, e.Revision)
		require.True(t, strings.HasPrefix(e.Digest, "sha256:"))
		_, err = tr.Write(ctx, "README.md", []byte("# hello\n"))
		require.NoError(t, err)
		e2, err := tr.Write(ctx, "src/main.go", []byte("package main\n"))
		require.NoError(t, err)
		require.EqualValues(t, 2, e2.Revision)
		require.NotEqual(t, e.Object, e2.Object, "a new version is a new object")

		b, got, err := tr.Read(ctx, "src/main.go")
		require.NoError(t, err)
		require.Equal(t, "package main\n", string(b))
		require.Equal(t, e2, got)

		items, err := tr.List(ctx, "", nil)
		require.NoError(t, err)
		require.Equal(t, []workspace.DirEntry{{Name: "README.md", Size: 8, Files: 1}, {Name: "src", Dir: true, Size: 13, Files: 1}}, items)
		_, err = tr.List(ctx, "docs", nil)
		require.ErrorIs(t, err, workspace.ErrNotFound)
		_, err = tr.List(ctx, "README.md", nil)
		require.ErrorIs(t, err, workspace.ErrNotFound)

		ms, trunc, err := tr.Grep(ctx, regexp.MustCompile(`^package`), "", 0, nil)
		require.NoError(t, err)
		require.False(t, trunc)
		require.Equal(t, []workspace.Match{{Path: "src/main.go", Line: 1, Text: "package main"}}, ms)
		hidden, _, err := tr.Grep(ctx, regexp.MustCompile(`.`), "", 0, func(p string) bool { return p != "src/main.go" })
		require.NoError(t, err)
		require.Equal(t, []workspace.Match{{Path: "README.md", Line: 1, Text: "# hello"}}, hidden)

		n, files, err := tr.Usage(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 21, n)
		require.Equal(t, 2, files)

		require.NoError(t, tr.Delete(ctx, "README.md"))
		require.ErrorIs(t, tr.Delete(ctx, "README.md"), workspace.ErrNotFound)
		require.Equal(t, []string{"src/main.go"}, paths(t, tr))
	})

	t.Run("grep output is capped", func(t *testing.T) {
		t.Parallel()
		tr := setup(t).tree(t, "s1", workspace.Limits{})
		_, err := tr.Write(ctx, "many.txt", []byte(strings.Repeat("hit "+strings.Repeat("x", 500)+"\n", 20)))
		require.NoError(t, err)
		ms, trunc, err := tr.Grep(ctx, regexp.MustCompile(`hit`), "many.txt", 5, nil)
		require.NoError(t, err)
		require.True(t, trunc)
		require.Len(t, ms, 5)
		require.LessOrEqual(t, len(ms[0].Text), workspace.MaxMatchLineChars+len("…"))
	})

	t.Run("edit replaces exactly one occurrence", func(t *testing.T) {
		t.Parallel()
		tr := setup(t).tree(t, "s1", workspace.Limits{})
		_, err := tr.Write(ctx, "a.txt", []byte("one two two\n"))
		require.NoError(t, err)
		_, err = tr.Edit(ctx, "a.txt", "three", "3")
		require.ErrorIs(t, err, workspace.ErrNoMatch)
		_, err = tr.Edit(ctx, "a.txt", "two", "2")
		require.ErrorIs(t, err, workspace.ErrAmbiguous)
		require.ErrorContains(t, err, "2 times: include more of the surrounding lines")
		_, err = tr.Edit(ctx, "b.txt", "x", "y")
		require.ErrorIs(t, err, workspace.ErrNotFound)
		_, err = tr.Edit(ctx, "a.txt", "one", "1")
		require.NoError(t, err)
		b, _, err := tr.Read(ctx, "a.txt")
		require.NoError(t, err)
		require.Equal(t, "1 two two\n", string(b))
	})

	t.Run("a change with an id applies once", func(t *testing.T) {
		t.Parallel()
		tr := setup(t).tree(t, "s1", workspace.Limits{})
		_, err := tr.Write(ctx, "a.txt", []byte("v1"))
		require.NoError(t, err)
		first, err := tr.Edit(ctx, "a.txt", "v1", "v2", workspace.Once("run-1/call-7"))
		require.NoError(t, err)
		// The call is re-run after a crash: "v1" is gone, yet it answers
		// as the first attempt did.
		again, err := tr.Edit(ctx, "a.txt", "v1", "v2", workspace.Once("run-1/call-7"))
		require.NoError(t, err)
		require.Equal(t, first, again)
		_, err = tr.Edit(ctx, "a.txt", "v1", "v2", workspace.Once("run-1/call-8"))
		require.ErrorIs(t, err, workspace.ErrNoMatch, "another call is applied")
	})

	t.Run("paths that leave the tree are refused", func(t *testing.T) {
		t.Parallel()
		tr := setup(t).tree(t, "s1", workspace.Limits{})
		for p, want := range map[string]string{
			"":                       "path is empty",
			"/etc/passwd":            "is absolute: give a path relative to the workspace root, e.g. etc/passwd",
			"../x":                   "climbs out of its folder (..)",
			"a/../../x":              "climbs out",
			`a\b`:                    "backslash",
			"a\x00b":                 "control character",
			".":                      "path is empty",
			strings.Repeat("a", 600): "bytes long",
		} {
			_, err := tr.Write(ctx, p, []byte("x"))
			require.ErrorIs(t, err, workspace.ErrInvalidPath, p)
			require.ErrorContains(t, err, want, p)
		}
		require.Empty(t, paths(t, tr))
	})

	t.Run("oversized files quota and file count are refused", func(t *testing.T) {
		t.Parallel()
		tr := setup(t).tree(t, "s1", workspace.Limits{MaxFileBytes: 10, QuotaBytes: 25, MaxFiles: 3})
		_, err := tr.Write(ctx, "big", []byte(strings.Repeat("x", 11)))
		require.ErrorIs(t, err, workspace.ErrTooLarge)
		require.ErrorContains(t, err, "raise workspace.max_file_bytes")
		for i := range 2 {
			_, err := tr.Write(ctx, fmt.Sprintf("f%d", i), []byte(strings.Repeat("x", 10)))
			require.NoError(t, err)
		}
		_, err = tr.Write(ctx, "f2", []byte(strings.Repeat("x", 6)))
		require.ErrorIs(t, err, workspace.ErrQuota)
		require.ErrorContains(t, err, "past its quota of 25: delete files")
		_, err = tr.Write(ctx, "f0", []byte("small")) // replacing frees its old size
		require.NoError(t, err)
		_, err = tr.Write(ctx, "f2", []byte("x"))
		require.NoError(t, err)
		_, err = tr.Write(ctx, "f3", []byte("x"))
		require.ErrorIs(t, err, workspace.ErrQuota)
		require.ErrorContains(t, err, "holds 3 files")
		_, err = tr.Edit(ctx, "f2", "x", strings.Repeat("y", 11))
		require.ErrorIs(t, err, workspace.ErrTooLarge)
	})

	t.Run("trees of two sessions are apart", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a, c := b.tree(t, "alice", workspace.Limits{}), b.tree(t, "carol", workspace.Limits{})
		_, err := a.Write(ctx, "secret.txt", []byte("a"))
		require.NoError(t, err)
		_, _, err = c.Read(ctx, "secret.txt")
		require.ErrorIs(t, err, workspace.ErrNotFound)
		run, err := b.st.Tree(workspace.Scope{Kind: workspace.ByRun, ID: "alice"}, workspace.Limits{})
		require.NoError(t, err)
		require.Empty(t, paths(t, run), "a run scope is not the session of the same id")
		require.NoError(t, a.Remove(ctx))
		require.Empty(t, paths(t, a))
		require.NoError(t, a.Remove(ctx), "removing twice")
	})

	t.Run("bad scopes are refused", func(t *testing.T) {
		t.Parallel()
		st := setup(t).st
		_, err := st.Tree(workspace.Scope{Kind: "user", ID: "x"}, workspace.Limits{})
		require.ErrorIs(t, err, workspace.ErrInvalidScope)
		_, err = st.Tree(workspace.Scope{Kind: workspace.BySession, ID: "a.b"}, workspace.Limits{})
		require.ErrorIs(t, err, workspace.ErrInvalidScope)
	})
}

// TestConcurrentWriters: writers on separate connections change one tree
// at once — different files, and edits of the same file — and no update
// is lost.
func TestConcurrentWriters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	const n = 8
	trees := make([]*workspace.Tree, n)
	for i := range trees {
		st, err := workspace.New(workspace.Config{JetStream: b.connect(t)})
		require.NoError(t, err)
		trees[i], err = st.Tree(workspace.Scope{Kind: workspace.ByRun, ID: "r1"}, workspace.Limits{})
		require.NoError(t, err)
	}
	_, err := trees[0].Write(ctx, "log.txt", []byte("END"))
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make([]error, 2*n)
	for i, tr := range trees {
		wg.Go(func() {
			_, errs[2*i] = tr.Write(ctx, fmt.Sprintf("f%d.txt", i), []byte(fmt.Sprintf("file %d", i)))
			_, errs[2*i+1] = tr.Edit(ctx, "log.txt", "END", fmt.Sprintf("w%d\nEND", i))
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "change %d", i)
	}
	got := paths(t, trees[0])
	require.Len(t, got, n+1, "%v", got)
	log, _, err := trees[0].Read(ctx, "log.txt")
	require.NoError(t, err)
	for i := range n {
		require.Contains(t, string(log), fmt.Sprintf("w%d\n", i), "every edit is in the file")
	}
	bytes, files, err := trees[0].Usage(ctx)
	require.NoError(t, err)
	require.Equal(t, n+1, files)
	var sum int64
	es, _ := trees[0].Files(ctx)
	for _, e := range es {
		sum += e.Size
	}
	require.Equal(t, sum, bytes, "the manifest's total is the files' sum")
}

func TestImportExport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("round trip", func(t *testing.T) {
		t.Parallel()
		tr := setup(t).tree(t, "s1", workspace.Limits{})
		src := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(src, "a", "b"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(src, "a", "b", "c.txt"), []byte("c"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(src, "top.txt"), []byte("top"), 0o644))
		require.NoError(t, os.Symlink("top.txt", filepath.Join(src, "link.txt")))
		n, err := tr.Import(ctx, src)
		require.NoError(t, err)
		require.Equal(t, 3, n)
		require.Equal(t, []string{"a/b/c.txt", "link.txt", "top.txt"}, paths(t, tr))
		dst := t.TempDir()
		n, err = tr.Export(ctx, dst)
		require.NoError(t, err)
		require.Equal(t, 3, n)
		b, err := os.ReadFile(filepath.Join(dst, "a", "b", "c.txt"))
		require.NoError(t, err)
		require.Equal(t, "c", string(b))
	})

	t.Run("a symlink out of the folder is refused", func(t *testing.T) {
		t.Parallel()
		tr := setup(t).tree(t, "s1", workspace.Limits{})
		outside := filepath.Join(t.TempDir(), "passwd")
		require.NoError(t, os.WriteFile(outside, []byte("root"), 0o644))
		src := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(src, "ok.txt"), []byte("ok"), 0o644))
		require.NoError(t, os.Symlink(outside, filepath.Join(src, "pw")))
		_, err := tr.Import(ctx, src)
		require.ErrorIs(t, err, workspace.ErrSymlink)
		require.ErrorContains(t, err, "pw is a symlink that leaves")
		require.Empty(t, paths(t, tr), "nothing is written")
	})

	t.Run("export never writes through a symlink out of the folder", func(t *testing.T) {
		t.Parallel()
		tr := setup(t).tree(t, "s1", workspace.Limits{})
		_, err := tr.Write(ctx, "out/x.txt", []byte("x"))
		require.NoError(t, err)
		dst, elsewhere := t.TempDir(), t.TempDir()
		require.NoError(t, os.Symlink(elsewhere, filepath.Join(dst, "out")))
		_, err = tr.Export(ctx, dst)
		require.Error(t, err)
		_, err = os.Stat(filepath.Join(elsewhere, "x.txt"))
		require.ErrorIs(t, err, os.ErrNotExist)
	})
}

func TestPolicy(t *testing.T) {
	t.Parallel()
	p := workspace.Policy{
		{Path: "secrets", Access: workspace.Deny},
		{Path: "**/*.env", Access: workspace.Deny},
		{Path: "docs/**", Access: workspace.Ask},
		{Path: "*.md", Access: workspace.Ask},
	}
	require.NoError(t, p.Validate())
	for path, want := range map[string]workspace.Access{
		"secrets/key.txt": workspace.Deny,
		"secrets":         workspace.Deny,
		"a/b/prod.env":    workspace.Deny,
		"prod.env":        workspace.Deny,
		"docs/x/y.txt":    workspace.Ask,
		"README.md":       workspace.Ask,
		"src/README.md":   workspace.Allow,
		"src/main.go":     workspace.Allow,
		"secretsx/a":      workspace.Allow,
	} {
		require.Equal(t, want, p.Decide(path), path)
	}
	require.ErrorContains(t, workspace.Policy{{Path: "a", Access: "maybe"}}.Validate(), `access "maybe": use allow, ask or deny`)
	require.ErrorContains(t, workspace.Policy{{Path: "/a", Access: "deny"}}.Validate(), "absolute")
	require.ErrorContains(t, workspace.Policy{{Path: "[", Access: "deny"}}.Validate(), "syntax")
}
