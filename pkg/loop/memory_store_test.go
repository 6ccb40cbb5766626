package loop_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/storetest"
)

func TestMemoryCheckpointer(t *testing.T) {
	t.Parallel()
	storetest.RunCheckpointer(t, func(*testing.T) loop.Checkpointer { return loop.NewMemoryCheckpointer() })
}

func TestMemorySession(t *testing.T) {
	t.Parallel()
	storetest.RunSession(t, func(*testing.T) loop.Session { return loop.NewMemorySession() })
}

func TestMemoryMailbox(t *testing.T) {
	t.Parallel()
	storetest.RunMailbox(t, func(*testing.T) (loop.Mailbox, func(*testing.T) loop.Mailbox) {
		mb := loop.NewMemoryMailbox()
		return mb, func(*testing.T) loop.Mailbox { return mb }
	})
}

func TestMemoryTrimToolOutput(t *testing.T) {
	t.Parallel()
	t.Run("Marker", func(t *testing.T) {
		t.Parallel()
		out, ok := loop.TrimToolOutput(strings.Repeat("a", 12345+10), 10, "c1")
		require.True(t, ok)
		require.Equal(t, strings.Repeat("a", 10)+"\n[... 12,345 chars trimmed from stored history. Call recall_tool_result(\"c1\") to retrieve the full output."+loop.TrimMarkerTail, out)
	})
	t.Run("Idempotent", func(t *testing.T) {
		t.Parallel()
		once, ok := loop.TrimToolOutput(strings.Repeat("b", 1000), 20, "c2")
		require.True(t, ok)
		twice, ok := loop.TrimToolOutput(once, 20, "c2")
		require.False(t, ok)
		require.Equal(t, once, twice)
		_, ok = loop.TrimToolOutput(once, 0, "c2")
		require.False(t, ok, "recognized whatever keepChars is")
	})
	t.Run("SkipsWhenNothingIsSaved", func(t *testing.T) {
		t.Parallel()
		for _, s := range []string{"", "short", strings.Repeat("c", 150)} {
			out, ok := loop.TrimToolOutput(s, 100, "c3")
			require.False(t, ok, "%d bytes", len(s))
			require.Equal(t, s, out)
		}
	})
	t.Run("CountsRunesAndCutsOnRuneBoundaries", func(t *testing.T) {
		t.Parallel()
		in := strings.Repeat("é", 500) // 2 bytes each
		out, ok := loop.TrimToolOutput(in, 3, "c4")
		require.True(t, ok)
		require.True(t, strings.HasPrefix(out, "ééé\n[... 497 chars trimmed"), out)
	})
	t.Run("KeepZero", func(t *testing.T) {
		t.Parallel()
		out, ok := loop.TrimToolOutput(strings.Repeat("d", 1000), 0, "c5")
		require.True(t, ok)
		require.True(t, strings.HasPrefix(out, "[... 1,000 chars trimmed"), out)
		out2, ok := loop.TrimToolOutput(strings.Repeat("d", 1000), -5, "c5")
		require.True(t, ok)
		require.Equal(t, out, out2, "negative keepChars counts as 0")
	})
}

func TestMemoryTrimToolResultEntries(t *testing.T) {
	t.Parallel()
	res := loop.ToolResultEntry("c1", "f", strings.Repeat("x", 1000), true)
	res.Raw = []byte(`1`)
	res.Parts = []loop.Part{{Type: loop.PartText, Text: "x"}}
	in := []loop.Entry{loop.ToolCallEntry("c1", "f", "{}"), res, loop.ToolResultEntry("c2", "f", "ok", false)}
	out, n := loop.TrimToolResultEntries(in, 10)
	require.Equal(t, 1, n)
	require.Equal(t, strings.Repeat("x", 1000), in[1].Output, "the input is not modified")
	require.Equal(t, in[0], out[0])
	require.Equal(t, in[2], out[2])
	require.Equal(t, "c1", out[1].CallID)
	require.Equal(t, "f", out[1].Name)
	require.True(t, out[1].IsError)
	require.Nil(t, out[1].Raw)
	require.Nil(t, out[1].Parts)
	same, n := loop.TrimToolResultEntries(out, 10)
	require.Zero(t, n)
	require.Equal(t, out, same)
}
