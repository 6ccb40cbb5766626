package loop

import (
	"context"
	"log/slog"
)

// HookFunc observes one event with the run's live context.
type HookFunc func(ctx context.Context, rc *RunContext, ev Event)

// Hooks observe a run's events before the stream consumer does, in emission
// order. Catch-all handlers run first, then handlers registered for the
// event's type, each in registration order. A panicking handler is logged
// and skipped (fail-open). Build with NewHooks; Hooks is configuration and
// must not be modified once runs use it.
type Hooks struct {
	any    []HookFunc
	byType map[EventType][]HookFunc
}

// NewHooks returns an empty hook set.
func NewHooks() *Hooks { return &Hooks{} }

// OnAny registers f for every event.
func (h *Hooks) OnAny(f HookFunc) *Hooks {
	h.any = append(h.any, f)
	return h
}

// On registers f for events of the given types.
func (h *Hooks) On(f HookFunc, types ...EventType) *Hooks {
	if h.byType == nil {
		h.byType = make(map[EventType][]HookFunc)
	}
	for _, t := range types {
		h.byType[t] = append(h.byType[t], f)
	}
	return h
}

func (h *Hooks) dispatch(ctx context.Context, rc *RunContext, ev Event, log *slog.Logger) {
	if h == nil {
		return
	}
	for _, f := range h.any {
		callHook(ctx, f, rc, ev, log)
	}
	if h.byType != nil {
		for _, f := range h.byType[ev.Type()] {
			callHook(ctx, f, rc, ev, log)
		}
	}
}

func callHook(ctx context.Context, f HookFunc, rc *RunContext, ev Event, log *slog.Logger) {
	defer func() {
		if p := recover(); p != nil {
			log.Warn("hook panicked; continuing", "event", ev.Type(), "panic", p)
		}
	}()
	f(ctx, rc, ev)
}
