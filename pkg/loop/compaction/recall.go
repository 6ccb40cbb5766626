package compaction

import (
	"context"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// RecallToolName is the name of the recall tool.
const RecallToolName = "recall_tool_result"

type recallArgs struct {
	Ref string `json:"ref" desc:"The reference named in the marker: a call id or a content digest."`
}

// RecallTool returns the recall_tool_result tool bound to store (nil: the
// transcript only). It never re-runs a tool; it resolves ref in order:
// the store (an error there falls through), the newest transcript result
// whose call id is ref, the newest whose output digest is ref, else
// "No tool result found for reference '<ref>'." — all as plain output.
// [Compaction.Tools] offers it automatically.
func RecallTool(store ResultStore) *loop.Tool {
	return loop.NewTool(RecallToolName,
		"Retrieve the full output of an earlier tool call that was cleared or trimmed to a preview to save context. "+
			"Pass the reference the marker names. This does not run the tool again.",
		func(ctx context.Context, rc *loop.RunContext, in recallArgs) (string, error) {
			var entries []loop.Entry
			if rc != nil {
				entries = rc.Entries()
			}
			return Recall(ctx, store, entries, in.Ref), nil
		})
}

// Recall resolves ref the way recall_tool_result does (see [RecallTool]).
func Recall(ctx context.Context, store ResultStore, transcript []loop.Entry, ref string) string {
	if store != nil && ref != "" {
		if out, ok, err := store.Get(ctx, ref); err == nil && ok {
			return out
		}
	}
	for i := len(transcript) - 1; i >= 0; i-- {
		if e := &transcript[i]; e.Kind == loop.KindToolResult && e.CallID == ref {
			return resultText(e)
		}
	}
	for i := len(transcript) - 1; i >= 0; i-- {
		if e := &transcript[i]; e.Kind == loop.KindToolResult && Digest(e.Output) == ref {
			return resultText(e)
		}
	}
	return "No tool result found for reference '" + ref + "'."
}

func resultText(e *loop.Entry) string {
	if e.Output == "" && len(e.Parts) > 0 {
		return loop.PartsText(e.Parts)
	}
	return e.Output
}
