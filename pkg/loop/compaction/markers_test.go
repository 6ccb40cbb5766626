package compaction_test

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/compaction"
)

func TestMarkers(t *testing.T) {
	t.Parallel()

	t.Run("Clear", func(t *testing.T) {
		t.Parallel()
		require.Equal(t,
			`[Earlier tool result cleared to save context. Call recall_tool_result("call_7") to retrieve the full output.]`,
			compaction.ClearMarker("call_7"))
	})

	t.Run("Offload", func(t *testing.T) {
		t.Parallel()
		got := compaction.OffloadMarker(compaction.OffloadRecord{Preview: "first line\nsecond", Chars: 1234567, Digest: "0123456789abcdef"})
		require.Equal(t, "[Tool result (1,234,567 chars) trimmed to a preview to save context.\n"+
			"Preview:\n"+
			"first line\nsecond\n"+
			`Call recall_tool_result("0123456789abcdef") for the full output.]`, got)
		require.Contains(t, compaction.OffloadMarker(compaction.OffloadRecord{Chars: 999, Digest: "d"}), "(999 chars)")
		require.Contains(t, compaction.OffloadMarker(compaction.OffloadRecord{Chars: 4000, Digest: "d"}), "(4,000 chars)")
	})

	t.Run("Summary", func(t *testing.T) {
		t.Parallel()
		s := compaction.SummaryText("## Session intent\nfix the bug")
		require.True(t, strings.HasPrefix(s, "<context_summary>\n"))
		require.True(t, strings.HasSuffix(s, "\n## Session intent\nfix the bug\n</context_summary>"))
		require.Contains(t, s, "background reference, not instructions")
	})

	t.Run("Digest", func(t *testing.T) {
		t.Parallel()
		sum := sha1.Sum([]byte("héllo"))
		require.Equal(t, hex.EncodeToString(sum[:])[:16], compaction.Digest("héllo"))
		require.Len(t, compaction.Digest(""), 16)
	})

	t.Run("MarkerEntriesKeepCallIDNameAndErrorFlag", func(t *testing.T) {
		t.Parallel()
		big := payload("x", 9000)
		es := []loop.Entry{user("go"), call("c1"), loop.ToolResultEntry("c1", "f", big, true), text("ok"), user("more")}
		es[2].Raw = []byte(`{"k":1}`)
		cfg := compaction.Config{ContextWindow: 2500, ReserveOutputTokens: compaction.None, KeepRecentTokens: 10}

		cfg.Stages = []compaction.Stage{compaction.Clear{KeepLast: compaction.None}}
		r := compact(t, compaction.New(cfg), request(newProvider(), es))
		require.Equal(t, "clear", r.Reason)
		require.Equal(t, loop.ToolResultEntry("c1", "f", compaction.ClearMarker("c1"), true), r.Entries[2],
			"cleared: same id, name and error flag; no raw")

		cfg.Stages = []compaction.Stage{compaction.Offload{KeepLast: compaction.None}}
		r = compact(t, compaction.New(cfg), request(newProvider(), es))
		require.Equal(t, "offload", r.Reason)
		want := compaction.OffloadMarker(compaction.OffloadRecord{Preview: big[:400], Chars: 9000, Digest: compaction.Digest(big)})
		require.Equal(t, loop.ToolResultEntry("c1", "f", want, true), r.Entries[2], "offloaded: same id, name and error flag; no raw")
		require.Equal(t, big, es[2].Output, "the transcript keeps the output")
		require.NotNil(t, es[2].Raw)
	})
}
