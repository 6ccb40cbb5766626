package cli

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Colours and the spinner are for terminals only: a buffer, a pipe or a
// file gets plain text, and NO_COLOR turns colours off.
func TestStyleOnlyOnTerminals(t *testing.T) {
	t.Parallel()
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { _ = pr.Close(); _ = pw.Close() })
	env := &Env{Stdout: pw, Stderr: &bytes.Buffer{}, Getenv: getenv(nil)}
	require.False(t, isTerminal(pw), "a pipe is not a terminal")
	require.False(t, isTerminal(&bytes.Buffer{}))
	require.False(t, useColor(env, pw))
	r := newRenderer(&Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Getenv: getenv(nil)})
	require.False(t, r.pal.on)
	require.Nil(t, r.spin)
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil { // only where the test has a terminal
		defer tty.Close()
		require.True(t, useColor(&Env{Getenv: getenv(nil)}, tty))
		require.False(t, useColor(&Env{Getenv: getenv(map[string]string{"NO_COLOR": "1"})}, tty))
	}
}

// On a terminal, the renderer paints marks and shows a spinner on stderr
// while a tool runs; the next event stops it and clears its line.
func TestRendererColoursAndSpinner(t *testing.T) {
	t.Parallel()
	out, errw := &bytes.Buffer{}, &syncBuf{}
	r := &renderer{w: out, errw: errw, pal: palette{on: true}, spin: &spinner{w: errw, interval: 5 * time.Millisecond}}
	call := loop.ToolCall{ID: "c1", Name: "fetch_page", Arguments: `{"url":"x"}`}
	r.render(&loop.ToolCallStarted{Call: call})
	require.Contains(t, out.String(), styleCyan+"→"+styleReset+" "+styleBold+"fetch_page"+styleReset)
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(errw.String(), "fetch_page running") < 2 {
		require.True(t, time.Now().Before(deadline), "waiting for the spinner to animate: %q", errw.String())
		time.Sleep(5 * time.Millisecond)
	}
	done := r.spin.done
	r.render(&loop.ToolCallCompleted{Call: call, Output: "ok"})
	select {
	case <-done:
	default:
		t.Fatal("the spinner still runs after the tool's result")
	}
	require.True(t, strings.HasSuffix(errw.String(), "\r\x1b[K"), "the spinner's line is cleared: %q", errw.String())
	require.Contains(t, out.String(), styleGreen+"←"+styleReset+" fetch_page: ok")
	r.render(&loop.RunFailed{Error: loop.ErrorInfo{Type: "X", Message: "boom"}})
	require.Contains(t, errw.String(), styleRed+"run failed"+styleReset)

	// Plain: no escape codes, no spinner.
	plain := &bytes.Buffer{}
	p := &renderer{w: plain, errw: plain}
	p.render(&loop.ToolCallStarted{Call: call})
	p.render(&loop.ToolCallCompleted{Call: call, Output: "ok"})
	require.Equal(t, "→ fetch_page({\"url\":\"x\"})\n← fetch_page: ok\n", plain.String())
}
