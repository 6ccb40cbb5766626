package loop

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
)

// head builds the checkpoint head.
func (ru *run) head(status RunStatus) RunHead {
	h := RunHead{
		Agent: ru.agent.Name, Usage: ru.rc.Usage(), Turns: ru.turns, Status: status,
		LastInputTokens: ru.lastInputTokens, UpdatedAt: ru.r.now().UTC(),
	}
	if len(ru.contextState) > 0 {
		h.ContextState = maps.Clone(ru.contextState)
	}
	return h
}

// save appends the entries not yet stored with a running head. When there
// is none and the head is the one last written but for its time (a turn's
// end after its tool results were saved), the checkpoint already holds
// everything a resume needs and nothing is written.
func (ru *run) save() error {
	if ru.opts.checkpointer == nil {
		return nil
	}
	h := ru.head(StatusRunning)
	if ru.wrote && len(ru.transcript()) == ru.runStart+ru.stored && sameHead(&ru.saved, &h) {
		return nil
	}
	return ru.write(ru.parent, h)
}

// sameHead reports whether two heads differ at most in UpdatedAt: the
// fields compared one by one, deeply where they hold references (so
// nothing is copied into an interface).
func sameHead(a, b *RunHead) bool {
	return a.Agent == b.Agent && a.Usage == b.Usage && a.Turns == b.Turns && a.Status == b.Status &&
		a.LastInputTokens == b.LastInputTokens &&
		reflect.DeepEqual(a.Output, b.Output) && reflect.DeepEqual(a.Error, b.Error) &&
		reflect.DeepEqual(a.ContextState, b.ContextState)
}

func (ru *run) write(ctx context.Context, h RunHead) error {
	tr := ru.transcript()
	fresh := tr[ru.runStart+ru.stored:]
	rev, err := ru.opts.checkpointer.Append(ctx, ru.opts.runID, CheckpointWrite{
		Base: ru.stored, Entries: fresh, Head: h, Revision: ru.rev,
	})
	if err != nil {
		return fmt.Errorf("checkpoint append %s: %w", ru.opts.runID, err)
	}
	ru.rev = rev
	ru.stored += len(fresh)
	ru.saved, ru.wrote = h, true
	return nil
}

// saveTerminal writes an interrupted or failed head, best effort and
// shielded from cancellation.
func (ru *run) saveTerminal(status RunStatus, info *ErrorInfo) error {
	if ru.opts.checkpointer == nil {
		return nil
	}
	h := ru.head(status)
	h.Error = info
	return ru.write(context.WithoutCancel(ru.parent), h)
}

// complete finalizes the checkpoint (or deletes it).
func (ru *run) complete(output any) error {
	cp := ru.opts.checkpointer
	if cp == nil {
		ru.completed = true
		return nil
	}
	if ru.opts.deleteOnSuccess {
		if err := cp.Delete(ru.parent, ru.opts.runID); err != nil {
			return fmt.Errorf("checkpoint delete %s: %w", ru.opts.runID, err)
		}
		ru.completed = true
		return nil
	}
	h := ru.head(StatusCompleted)
	safe, ok := jsonSafe(output)
	if ok {
		h.Output = safe
	} else {
		h.Error = &ErrorInfo{Type: "OutputNotSerializable", Message: fmt.Sprintf("the output (%T) is not JSON-representable", output)}
	}
	if err := ru.write(ru.parent, h); err != nil {
		return err
	}
	ru.completed = true
	return nil
}

// jsonSafe converts v to a JSON-representable value (round trip through
// encoding/json); ok is false when it cannot be encoded.
func jsonSafe(v any) (any, bool) {
	switch v.(type) {
	case nil, string, bool, int, int64, float64, map[string]any, []any:
		if _, err := json.Marshal(v); err != nil {
			return nil, false
		}
		return v, true
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, false
	}
	return out, true
}
