package compaction

import (
	"context"
	"sync"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Context window resolution: the configured
// window, else the provider's own answer (asked once per endpoint and
// model, memoized in the policy); a window an overflow error named for the
// endpoint and model caps either. 0 means unknown: compaction is then
// reactive only.

// windowKey is the learned-window key: "<endpoint>\x00<model>".
func windowKey(req *loop.CompactRequest) string {
	ep := ""
	if req.Provider != nil {
		ep = req.Provider.Info().Endpoint
	}
	return ep + "\x00" + req.Model
}

// discovery memoizes one endpoint's answer. Concurrent runs asking for the
// same key wait for the first asker instead of asking again.
type discovery struct {
	mu     sync.Mutex
	done   bool
	window int
}

// discoveries is the policy's memo of provider answers, keyed like
// learned windows. Errors are not memoized (the next call asks again).
type discoveries struct {
	m sync.Map // key → *discovery
}

func (d *discoveries) window(ctx context.Context, c *Compaction, p loop.Provider, key string) int {
	wd, ok := p.(loop.ContextWindowDiscoverer)
	if !ok {
		return 0
	}
	v, _ := d.m.LoadOrStore(key, &discovery{})
	e := v.(*discovery)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done {
		return e.window
	}
	w, err := wd.DiscoverContextWindow(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("compaction: context window discovery failed; compacting reactively only", "model", p.Info().Model, "error", err)
		}
		return 0
	}
	e.window, e.done = max(w, 0), true
	return e.window
}

// resolveWindow returns the model's known window (0: unknown).
func (c *Compaction) resolveWindow(ctx context.Context, req *loop.CompactRequest, st *state, key string) int {
	w := c.cfg.ContextWindow
	if w == 0 && req.Provider != nil {
		w = c.disc.window(ctx, c, req.Provider, key)
	}
	if lw := st.learned[key]; lw > 0 && (w == 0 || lw < w) {
		w = lw
	}
	return w
}

// budget resolves the watermarks for window.
func (c *Compaction) budget(window int, aggressive bool) Budget {
	b := Budget{Window: window, Reserve: c.cfg.ReserveOutputTokens}
	b.Usable = window - b.Reserve
	if b.Reserve >= window {
		b.Usable = max(window/2, 1)
	}
	b.Trigger = max(c.cfg.CompactAt.Of(b.Usable), 1)
	b.Target = min(c.cfg.CompactTo.Of(b.Usable), b.Trigger-1)
	b.Tail = c.cfg.KeepRecentTokens
	if b.Tail == 0 {
		b.Tail = b.Usable / 5
	}
	if aggressive {
		b.Target = min(b.Target, b.Usable/4)
		b.Tail = min(b.Tail, b.Usable/10)
	}
	b.Target = max(b.Target, 0)
	return b
}
