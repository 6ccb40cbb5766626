package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// suiteTimeout bounds every subtest, so a store that hangs fails instead of
// stalling the whole test binary.
const suiteTimeout = 2 * time.Minute

// LargeOutputSize is the size of the tool output the large-value tests
// round-trip: well past NATS's default 1 MiB max payload.
const LargeOutputSize = 5 << 20

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), suiteTimeout)
	t.Cleanup(cancel)
	return ctx
}

var idSeq atomic.Uint64

// newID returns an id unique within the test binary, valid as a run id,
// session id or mailbox token (docs/protocol.md#identifiers: 1–128 of [A-Za-z0-9_-]).
func newID(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1_000_000, idSeq.Add(1))
}

var validID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// turn returns the entries of one model turn with a tool round trip: the
// assistant's text and call, and the tool's result (with Raw and Parts so the
// reference fields are exercised).
func turn(n int) []loop.Entry {
	id := fmt.Sprintf("call-%d", n)
	res := loop.ToolResultEntry(id, "lookup", fmt.Sprintf("result of turn %d", n), n%2 == 1)
	res.Raw = json.RawMessage(fmt.Sprintf(`{"turn":%d}`, n))
	res.Parts = []loop.Part{{Type: loop.PartText, Text: fmt.Sprintf("part %d", n)}}
	return []loop.Entry{
		loop.AssistantText(fmt.Sprintf("thinking about turn %d", n)),
		loop.ToolCallEntry(id, "lookup", fmt.Sprintf(`{"q":%d}`, n)),
		res,
	}
}

// head returns a running head for turn n.
func head(n int) loop.RunHead {
	return loop.RunHead{
		Agent:           "agent-a",
		Usage:           loop.Usage{InputTokens: int64(10 * n), OutputTokens: int64(n), TotalTokens: int64(11 * n)},
		Turns:           n,
		Status:          loop.StatusRunning,
		LastInputTokens: int64(10 * n),
		ContextState:    map[string]any{"context": map[string]any{"version": 3, "cleared": []any{"c1"}, "turn": n}},
		UpdatedAt:       time.Date(2025, 1, 2, 3, 4, 5, n*1000, time.UTC),
	}
}

// normEntries makes empty and nil reference fields equal, since an encoder
// may not tell them apart.
func normEntries(in []loop.Entry) []loop.Entry {
	out := make([]loop.Entry, len(in))
	for i, e := range in {
		if len(e.Raw) == 0 {
			e.Raw = nil
		}
		if len(e.Parts) == 0 {
			e.Parts = nil
		}
		out[i] = e
	}
	return out
}

func requireEntries(t *testing.T, want, got []loop.Entry, msgAndArgs ...any) {
	t.Helper()
	require.Len(t, got, len(want), msgAndArgs...)
	w, g := normEntries(want), normEntries(got)
	for i := range w {
		require.Equal(t, w[i], g[i], append([]any{"entry %d", i}, msgAndArgs...)...)
	}
}

// requireJSON compares two values by their JSON encodings.
func requireJSON(t *testing.T, want, got any, msgAndArgs ...any) {
	t.Helper()
	wb, err := json.Marshal(want)
	require.NoError(t, err)
	gb, err := json.Marshal(got)
	require.NoError(t, err)
	require.JSONEq(t, string(wb), string(gb), msgAndArgs...)
}

func requireHead(t *testing.T, want, got loop.RunHead) {
	t.Helper()
	require.Equal(t, want.Agent, got.Agent, "agent")
	require.Equal(t, want.Usage, got.Usage, "usage")
	require.Equal(t, want.Turns, got.Turns, "turns")
	require.Equal(t, want.Status, got.Status, "status")
	require.Equal(t, want.LastInputTokens, got.LastInputTokens, "last input tokens")
	require.Equal(t, want.Error, got.Error, "error")
	requireJSON(t, want.Output, got.Output, "output")
	if len(want.ContextState) == 0 {
		require.Empty(t, got.ContextState, "context state")
	} else {
		requireJSON(t, want.ContextState, got.ContextState, "context state")
	}
	require.True(t, want.UpdatedAt.Equal(got.UpdatedAt), "updated at: want %s, got %s", want.UpdatedAt, got.UpdatedAt)
}

func requireSegments(t *testing.T, want, got []loop.Segment) {
	t.Helper()
	require.Len(t, got, len(want), "segments")
	for i := range want {
		require.Equal(t, want[i].RunID, got[i].RunID, "segment %d run id", i)
		requireEntries(t, want[i].Entries, got[i].Entries, "segment %d", i)
		if len(want[i].Meta) == 0 {
			require.Empty(t, got[i].Meta, "segment %d meta", i)
		} else {
			requireJSON(t, want[i].Meta, got[i].Meta, "segment %d meta", i)
		}
	}
}

// largeOutput returns n bytes of text that does not compress to nothing
// (so a store cannot pass by compression alone) and is easy to diff.
func largeOutput(n int) string {
	var b strings.Builder
	b.Grow(n + 64)
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "line %08d %x\n", i, uint32(i)*2654435761)
	}
	return b.String()[:n]
}
