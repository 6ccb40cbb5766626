package mcp_test

import (
	"encoding/base64"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/mcptest"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/tools/mcp"
)

func TestEverythingOverStdio(t *testing.T) {
	t.Parallel()
	m := start(t, mcp.Config{Servers: map[string]mcp.Server{"everything": mcptest.Everything(t)}})

	t.Run("tools are named server__tool with the server's schema", func(t *testing.T) {
		echo := tool(t, m, "everything", "everything__echo")
		require.Contains(t, string(echo.Parameters), `"message"`)
		require.NotEmpty(t, echo.Description)
	})
	t.Run("echo", func(t *testing.T) {
		out, err := call(t, tool(t, m, "everything", "everything__echo"), map[string]any{"message": "hello"})
		require.NoError(t, err)
		require.Equal(t, "Echo: hello", out)
	})
	t.Run("get-sum", func(t *testing.T) {
		out, err := call(t, tool(t, m, "everything", "everything__get-sum"), map[string]any{"a": 2, "b": 40})
		require.NoError(t, err)
		require.Contains(t, out, "42")
	})
	t.Run("arguments are validated against the schema before the call", func(t *testing.T) {
		_, err := call(t, tool(t, m, "everything", "everything__echo"), map[string]any{"text": "wrong key"})
		require.ErrorIs(t, err, loop.ErrInvalidToolArgs)
		require.Contains(t, err.Error(), "message")
	})
	t.Run("an image is an image part", func(t *testing.T) {
		out, err := call(t, tool(t, m, "everything", "everything__get-tiny-image"), map[string]any{})
		require.NoError(t, err)
		parts, ok := out.([]loop.Part)
		require.True(t, ok, "result %T: %v", out, out)
		var img *loop.Part
		for i := range parts {
			if parts[i].Type == loop.PartImage {
				img = &parts[i]
			}
		}
		require.NotNil(t, img, "parts: %+v", parts)
		require.Equal(t, "image/png", img.MimeType)
		png, err := base64.StdEncoding.DecodeString(img.Data)
		require.NoError(t, err)
		require.Equal(t, "\x89PNG", string(png[:4]))
		require.Contains(t, loop.PartsText(parts), "[image: image/png,")
	})
	t.Run("an embedded text resource is text", func(t *testing.T) {
		out, err := call(t, tool(t, m, "everything", "everything__get-resource-reference"), map[string]any{"resourceType": "Text", "resourceId": 1})
		require.NoError(t, err)
		require.Contains(t, out, "Resource 1")
	})
}

func TestFilesystemOverStdio(t *testing.T) {
	t.Parallel()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("remember the milk\n"), 0o644))
	m := start(t, mcp.Config{Servers: map[string]mcp.Server{"fs": mcptest.Filesystem(t, dir)}})

	out, err := call(t, tool(t, m, "fs", "fs__read_text_file"), map[string]any{"path": filepath.Join(dir, "notes.txt")})
	require.NoError(t, err)
	require.Equal(t, "remember the milk\n", out)

	// isError: true is an error result the model sees, with the
	// server's message.
	_, err = call(t, tool(t, m, "fs", "fs__read_text_file"), map[string]any{"path": filepath.Join(dir, "missing.txt")})
	var te *loop.ToolError
	require.ErrorAs(t, err, &te)
	require.Contains(t, te.Message, "missing.txt")
	require.NotErrorIs(t, err, mcp.ErrServerDown)
}

// One stdio process serves every concurrent call of the process.
func TestConcurrentCallsShareOneProcess(t *testing.T) {
	t.Parallel()
	srv := mcptest.Everything(t)
	tag := t.Name() + "-" + strconv.Itoa(os.Getpid())
	srv.Env = map[string]string{"LOVIA_TEST_TAG": tag}
	m := start(t, mcp.Config{Servers: map[string]mcp.Server{"everything": srv}})
	st, err := m.Status("everything")
	require.NoError(t, err)
	echo := tool(t, m, "everything", "everything__echo")
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Go(func() {
			out, err := call(t, echo, map[string]any{"message": "n" + string(rune('a'+i%26))})
			if err == nil && out != "Echo: n"+string(rune('a'+i%26)) {
				err = errors.New("unexpected output")
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	after, err := m.Status("everything")
	require.NoError(t, err)
	require.Equal(t, 1, after.Connects)
	require.Equal(t, st.PID, after.PID)
	require.Equal(t, []int{st.PID}, mcptest.Processes(t, "LOVIA_TEST_TAG="+tag))
}

// A server killed with SIGKILL during a call: that call is a clear tool
// error naming the server; the server is started again and the next call
// works.
func TestKilledServerIsRestarted(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	m := start(t, mcp.Config{
		Servers:    map[string]mcp.Server{"everything": mcptest.Everything(t)},
		Logger:     slog.New(rec),
		MinBackoff: 50 * time.Millisecond,
	})
	st, err := m.Status("everything")
	require.NoError(t, err)
	require.NotZero(t, st.PID)

	long := tool(t, m, "everything", "everything__trigger-long-running-operation")
	done := make(chan error, 1)
	go func() {
		_, err := call(t, long, map[string]any{"duration": 30, "steps": 30})
		done <- err
	}()
	// The server reports progress once the operation runs.
	require.Eventually(t, func() bool { return rec.saw("MCP tool progress") }, 30*time.Second, 10*time.Millisecond,
		"waiting for the long-running call to report progress")
	require.NoError(t, syscall.Kill(st.PID, syscall.SIGKILL))

	var err2 error
	select {
	case err2 = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the call in flight did not fail after its server was killed")
	}
	var te *loop.ToolError
	require.ErrorAs(t, err2, &te)
	require.ErrorIs(t, err2, mcp.ErrServerDown)
	require.Contains(t, te.Message, `MCP server "everything"`)
	require.Contains(t, te.Hint, "call the tool again")

	require.Eventually(t, func() bool {
		s, _ := m.Status("everything")
		return s.Connected && s.Connects == 2
	}, 30*time.Second, 10*time.Millisecond, "waiting for the server to be restarted")
	s, _ := m.Status("everything")
	require.NotEqual(t, st.PID, s.PID)
	require.Contains(t, s.LastError, "session")

	out, err := call(t, tool(t, m, "everything", "everything__echo"), map[string]any{"message": "back"})
	require.NoError(t, err)
	require.Equal(t, "Echo: back", out)
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	t.Run("a command that does not exist names the server and what to fix", func(t *testing.T) {
		m, err := mcp.New(mcp.Config{Servers: map[string]mcp.Server{"nope": {Command: "/nonexistent/mcp-server"}}})
		require.NoError(t, err)
		err = m.Start(t.Context())
		require.ErrorContains(t, err, `MCP server "nope"`)
		require.ErrorContains(t, err, "fix `command`")
		require.NoError(t, m.Stop(t.Context()))
	})
	t.Run("an unset variable is named", func(t *testing.T) {
		m, err := mcp.New(mcp.Config{
			Servers: map[string]mcp.Server{"everything": {Command: "node", Env: map[string]string{"TOKEN": "${LOVIA_TEST_UNSET_SECRET}"}}},
			Getenv:  func(string) string { return "" },
		})
		require.NoError(t, err)
		err = m.Start(t.Context())
		require.ErrorIs(t, err, mcp.ErrUnsetVariable)
		require.ErrorContains(t, err, "LOVIA_TEST_UNSET_SECRET")
	})
	t.Run("a server that exits during the handshake shows its stderr", func(t *testing.T) {
		m, err := mcp.New(mcp.Config{Servers: map[string]mcp.Server{"bad": {Command: "node", Args: []string{mcptest.Script(t, "server-everything"), "bogus-transport"}}}})
		require.NoError(t, err)
		err = m.Start(t.Context())
		require.ErrorContains(t, err, `MCP server "bad"`)
		require.ErrorContains(t, err, "Unknown transport")
	})
	t.Run("bad declarations", func(t *testing.T) {
		for _, tc := range []struct {
			servers map[string]mcp.Server
			want    string
		}{
			{nil, "declare at least one"},
			{map[string]mcp.Server{"a__b": {Command: "x"}}, `without "__"`},
			{map[string]mcp.Server{"a": {}}, "needs `command`"},
			{map[string]mcp.Server{"a": {Command: "x", URL: "http://x"}}, "both"},
			{map[string]mcp.Server{"a": {URL: "ftp://x"}}, "http://"},
			{map[string]mcp.Server{"a": {Command: "x", Headers: map[string]string{"A": "b"}}}, "headers are for HTTP"},
		} {
			_, err := mcp.New(mcp.Config{Servers: tc.servers})
			require.ErrorContains(t, err, tc.want)
		}
	})
}

// A stdio server sees its env and the few inherited variables, not the
// worker's other variables (its secrets).
func TestServerEnvironment(t *testing.T) {
	t.Setenv("LOVIA_TEST_WORKER_SECRET", "do-not-leak")
	srv := mcptest.Everything(t)
	srv.Env = map[string]string{"GIVEN": "${LOVIA_TEST_WORKER_SECRET}-on-purpose"}
	m := start(t, mcp.Config{Servers: map[string]mcp.Server{"everything": srv}})
	out, err := call(t, tool(t, m, "everything", "everything__get-env"), map[string]any{})
	require.NoError(t, err)
	require.Contains(t, out, `"GIVEN": "do-not-leak-on-purpose"`)
	require.Contains(t, out, `"PATH"`)
	require.NotContains(t, out, "LOVIA_TEST_WORKER_SECRET")
}
