// Package window memoizes an endpoint's context window for a provider: the
// window its discovery API published (asked once, retried after a
// failure), never more than the smallest window an overflow rejection
// named.
package window

import (
	"context"
	"errors"
	"sync"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Memo is one provider's window knowledge. The zero value is ready; it is
// safe for concurrent use.
type Memo struct {
	mu       sync.Mutex
	window   int  // discovered window, valid when ok
	ok       bool // the endpoint was asked successfully
	rejected int  // smallest window named by an overflow rejection
}

// Get returns the configured window when positive, else the discovered one
// (lookup runs until it succeeds once), capped by any rejected window.
func (m *Memo) Get(ctx context.Context, configured int, lookup func(context.Context) (int, error)) (int, error) {
	if configured > 0 {
		return configured, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.ok {
		n, err := lookup(ctx)
		if err != nil {
			return 0, err
		}
		m.window, m.ok = n, true
	}
	if m.rejected > 0 && (m.window == 0 || m.rejected < m.window) {
		return m.rejected, nil
	}
	return m.window, nil
}

// Observe remembers the window a *loop.ContextOverflowError named and
// returns err unchanged.
func (m *Memo) Observe(err error) error {
	var co *loop.ContextOverflowError
	if errors.As(err, &co) && co.ReportedWindow > 0 {
		m.mu.Lock()
		if m.rejected == 0 || co.ReportedWindow < m.rejected {
			m.rejected = co.ReportedWindow
		}
		m.mu.Unlock()
	}
	return err
}
