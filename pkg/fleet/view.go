package fleet

import (
	"context"
	"sort"
	"sync"
	"time"
)

// View is a cached read of the registry for the API: it answers from the
// members read at most maxAge ago, and reads again before it says an
// agent is not served (so a worker started a moment ago is seen at once).
// It is safe for concurrent use and starts no goroutines.
type View struct {
	reg    *Registry
	maxAge time.Duration

	mu      sync.Mutex
	members []Member
	readAt  time.Time
}

// NewView builds a View of reg.
func NewView(reg *Registry, maxAge time.Duration) *View {
	return &View{reg: reg, maxAge: maxAge}
}

// Members returns the live members, read at most maxAge ago (fresh
// forces a read).
func (v *View) Members(ctx context.Context, fresh bool) ([]Member, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !fresh && !v.readAt.IsZero() && time.Since(v.readAt) < v.maxAge {
		return v.members, nil
	}
	m, err := v.reg.Members(ctx)
	if err != nil {
		return nil, err
	}
	v.members, v.readAt = m, time.Now()
	return m, nil
}

// Serves reports whether a live worker serves agent, and the agents the
// live fleet serves.
func (v *View) Serves(ctx context.Context, agent string) (bool, []string, error) {
	for _, fresh := range []bool{false, true} {
		ms, err := v.Members(ctx, fresh)
		if err != nil {
			return false, nil, err
		}
		for _, m := range ms {
			if m.Serves(agent) {
				return true, nil, nil
			}
		}
		if fresh {
			return false, Agents(ms), nil
		}
	}
	return false, nil, nil
}

// Agents lists the agents the members serve, sorted, once each.
func Agents(ms []Member) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range ms {
		for _, a := range m.Agents {
			if !seen[a.Name] {
				seen[a.Name] = true
				out = append(out, a.Name)
			}
		}
	}
	sort.Strings(out)
	return out
}
