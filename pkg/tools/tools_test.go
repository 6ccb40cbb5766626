package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

func TestEval(t *testing.T) {
	for expr, want := range map[string]string{
		"12*7": "84", "1 + 2 * 3": "7", "(1+2)*3": "9", "2^3^2": "512", "2**10": "1024",
		"-3 + 5": "2", "10 / 4": "2.5", "7 % 3": "1", "1,000 * 2": "2000", "12 x 7": "84",
	} {
		v, err := Eval(expr)
		require.NoError(t, err, expr)
		require.Equal(t, want, FormatNumber(v), expr)
	}
	for _, bad := range []string{"", "1 +", "(1", "1/0", "abc", "1 2", "2^99999"} {
		_, err := Eval(bad)
		require.Error(t, err, bad)
	}
}

func FuzzEval(f *testing.F) {
	for _, s := range []string{"1+2", "((3))", "-(-1)^2", "1/0", "9**9**9", "((((((("} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = Eval(s)
	})
}

func call(t *testing.T, tool *loop.Tool, args any) (any, error) {
	t.Helper()
	b, err := json.Marshal(args)
	require.NoError(t, err)
	return tool.Func(context.Background(), &loop.RunContext{}, b)
}

func TestBuiltinTools(t *testing.T) {
	ws := t.TempDir()
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	set, err := Builtin(Config{Workspace: ws, Now: func() time.Time { return now }})
	require.NoError(t, err)
	require.Equal(t, []string{"append_file", "ask_human", "calculator", "echo", "read_file", "sleep", "time_now"}, set.Names())

	v, err := call(t, set["echo"], map[string]string{"text": "hi"})
	require.NoError(t, err)
	require.Equal(t, "hi", v)

	v, err = call(t, set["calculator"], map[string]string{"expression": "12*7"})
	require.NoError(t, err)
	require.Equal(t, "84", v)
	_, err = call(t, set["calculator"], map[string]string{"expression": "1/0"})
	require.ErrorIs(t, err, loop.ErrTool)

	v, err = call(t, set["time_now"], map[string]string{})
	require.NoError(t, err)
	require.Equal(t, "2026-11-30T09:00:00Z", v)

	v, err = call(t, set["sleep"], map[string]int{"ms": 1})
	require.NoError(t, err)
	require.Equal(t, "slept 1 ms", v)

	_, err = call(t, set["append_file"], map[string]string{"path": "log/a.txt", "line": "one"})
	require.NoError(t, err)
	_, err = call(t, set["append_file"], map[string]string{"path": "log/a.txt", "line": "two"})
	require.NoError(t, err)
	v, err = call(t, set["read_file"], map[string]string{"path": "log/a.txt"})
	require.NoError(t, err)
	require.Equal(t, "one\ntwo\n", v)

	for _, p := range []string{"../escape.txt", "/etc/passwd", "log/../../x"} {
		_, err = call(t, set["read_file"], map[string]string{"path": p})
		require.ErrorIs(t, err, loop.ErrTool, p)
	}
	require.NoError(t, os.Symlink("/etc", filepath.Join(ws, "link")))
	_, err = call(t, set["read_file"], map[string]string{"path": "link/passwd"})
	require.ErrorIs(t, err, loop.ErrTool)

	_, err = set.Select("echo", "nope")
	require.ErrorContains(t, err, `unknown tool "nope"`)
}

func TestSleepHonoursCancellation(t *testing.T) {
	set, err := Builtin(Config{Workspace: t.TempDir()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = set["sleep"].Func(ctx, &loop.RunContext{}, json.RawMessage(`{"ms": 60000}`))
	require.ErrorIs(t, err, context.Canceled)
}
