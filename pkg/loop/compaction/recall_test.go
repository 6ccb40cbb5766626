package compaction_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/compaction"
)

func TestRecall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	old, newer := payload("old", 5000), payload("new", 5000)
	transcript := []loop.Entry{user("hi"), call("c1"), res("c1", old), call("c1"), res("c1", newer), call("c2"), res("c2", "two")}

	t.Run("ResolutionOrder", func(t *testing.T) {
		t.Parallel()
		store := compaction.NewMemoryStore(0)
		require.NoError(t, store.Put(ctx, "c2", "from the store"))
		require.Equal(t, "from the store", compaction.Recall(ctx, store, transcript, "c2"), "a store hit wins")
		require.Equal(t, newer, compaction.Recall(ctx, store, transcript, "c1"), "store miss: the newest result by call id")
		require.Equal(t, newer, compaction.Recall(ctx, brokenStore{}, transcript, "c1"), "store error: the transcript")
		require.Equal(t, old, compaction.Recall(ctx, nil, transcript, compaction.Digest(old)), "by output digest")
		require.Equal(t, "No tool result found for reference 'nope'.", compaction.Recall(ctx, store, transcript, "nope"))
		require.Equal(t, "No tool result found for reference ''.", compaction.Recall(ctx, nil, nil, ""))
	})

	t.Run("Tool", func(t *testing.T) {
		t.Parallel()
		store := compaction.NewMemoryStore(0)
		require.NoError(t, store.Put(ctx, compaction.Digest(old), old))
		c := compaction.New(compaction.Config{Store: store})
		tools := c.Tools()
		require.Len(t, tools, 1)
		tool := tools[0]
		require.Equal(t, compaction.RecallToolName, tool.Name)
		require.Same(t, tool, c.Tools()[0], "one tool for every run")
		var schema map[string]any
		require.NoError(t, json.Unmarshal(tool.Parameters, &schema))
		require.Equal(t, []any{"ref"}, schema["required"])
		out, err := tool.Func(ctx, nil, json.RawMessage(`{"ref":"`+compaction.Digest(old)+`"}`))
		require.NoError(t, err)
		require.Equal(t, old, out)
		_, err = tool.Func(ctx, nil, json.RawMessage(`{}`))
		require.Error(t, err, "ref is required")
	})
}
