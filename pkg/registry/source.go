package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/lovia-fleet/lovia/pkg/catalog"
)

// Source gives a worker its agents from the registry: the catalog of the
// registry's current revision, rebuilt after every change, and the
// catalog of any earlier revision a run is pinned to. Serve limits the
// agents the worker serves (claims runs of) to names matching one of its
// glob patterns; every agent is built, so handoffs to agents the worker
// does not serve still resolve.
//
// Start reads the registry and starts watching it; Stop ends the watch.
// It is safe for concurrent use.
type Source struct {
	reg   *Registry
	opts  catalog.Options
	serve []string
	log   *slog.Logger

	mu      sync.Mutex
	current *catalog.Catalog
	rev     uint64
	cache   map[uint64]*catalog.Catalog
	changes chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
}

// NewSource builds a Source. It starts nothing.
func NewSource(reg *Registry, opts catalog.Options, serve []string, log *slog.Logger) *Source {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Source{reg: reg, opts: opts, serve: serve, log: log, cache: map[uint64]*catalog.Catalog{}, changes: make(chan struct{}, 1)}
}

// ErrEmpty is returned by Start when the registry serves no agent to
// this worker.
var ErrEmpty = errors.New("registry: no agent to serve")

// Start builds the current catalog and starts following the registry,
// until Stop or until ctx ends.
func (s *Source) Start(ctx context.Context) error {
	if err := s.refresh(ctx); err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	revs, err := s.reg.Watch(wctx)
	if err != nil {
		cancel()
		return err
	}
	s.cancel, s.done = cancel, make(chan struct{})
	go func() {
		defer close(s.done)
		for range revs {
			rctx, rcancel := context.WithTimeout(wctx, 30*time.Second)
			if err := s.refresh(rctx); err != nil && wctx.Err() == nil {
				s.log.Warn("registry: rebuilding the agents after a change failed; serving the previous ones", "error", err)
			}
			rcancel()
		}
	}()
	return nil
}

// Stop stops following the registry.
func (s *Source) Stop(context.Context) error {
	if s.cancel == nil {
		return nil
	}
	s.cancel()
	<-s.done
	s.cancel = nil
	return nil
}

func (s *Source) refresh(ctx context.Context) error {
	rev, err := s.reg.Revision(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	same := s.current != nil && rev == s.rev
	s.mu.Unlock()
	if same {
		return nil
	}
	cat, err := s.build(ctx, rev)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.current, s.rev = cat, rev
	s.mu.Unlock()
	select {
	case s.changes <- struct{}{}:
	default:
	}
	s.log.Info("registry: serving agents", "revision", rev, "agents", s.Served())
	return nil
}

var agentInError = regexp.MustCompile(`agent "([A-Za-z0-9_-]+)"`)

// build builds the registry's agents at rev. An agent this worker cannot
// build (a tool it does not have, a model it cannot resolve) is left out,
// with a warning, and so is any agent that hands off to it.
func (s *Source) build(ctx context.Context, rev uint64) (*catalog.Catalog, error) {
	es, err := s.reg.At(ctx, rev)
	if err != nil {
		return nil, err
	}
	specs := make([]catalog.Spec, 0, len(es))
	for _, e := range es {
		specs = append(specs, e.Spec)
	}
	if len(specs) == 0 && rev != 0 {
		// Every agent was removed: serve none (not the last ones).
		return catalog.Empty(), nil
	}
	for len(specs) > 0 {
		cat, err := catalog.Build(catalog.File{Agents: specs}, s.opts)
		if err == nil {
			return cat, nil
		}
		bad := map[string]bool{}
		for _, m := range agentInError.FindAllStringSubmatch(err.Error(), -1) {
			bad[m[1]] = true
		}
		if len(bad) == 0 {
			return nil, err
		}
		s.log.Warn("registry: not serving agents this worker cannot build", "revision", rev, "error", err)
		specs = slices.DeleteFunc(specs, func(sp catalog.Spec) bool { return bad[sp.Name] })
	}
	return nil, fmt.Errorf("%w at revision %d: the registry is empty or no agent of it can be built here (lovia agents apply FILE)", ErrEmpty, rev)
}

// Current returns the catalog of the registry's current revision.
func (s *Source) Current() (*catalog.Catalog, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current, s.rev
}

// At returns the catalog of revision rev (the current one when rev is 0
// or the current revision), built once and kept for the runs pinned to it.
func (s *Source) At(ctx context.Context, rev uint64) (*catalog.Catalog, error) {
	s.mu.Lock()
	if rev == 0 || rev == s.rev {
		defer s.mu.Unlock()
		return s.current, nil
	}
	if c, ok := s.cache[rev]; ok {
		s.mu.Unlock()
		return c, nil
	}
	s.mu.Unlock()
	c, err := s.build(ctx, rev)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if len(s.cache) >= 16 {
		clear(s.cache)
	}
	s.cache[rev] = c
	s.mu.Unlock()
	return c, nil
}

// Changes signals (coalesced) that the current catalog changed.
func (s *Source) Changes() <-chan struct{} { return s.changes }

// Serves reports whether this worker serves agent name.
func (s *Source) Serves(name string) bool {
	if len(s.serve) == 0 {
		return true
	}
	for _, p := range s.serve {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// Removed reports whether the registry removed agent name (see
// Registry.Removed): a worker still resumes its runs in flight, from the
// revisions they are pinned to.
func (s *Source) Removed(ctx context.Context, name string) (bool, error) {
	return s.reg.Removed(ctx, name)
}

// Served lists the agents of the current catalog this worker serves.
func (s *Source) Served() []string {
	cur, _ := s.Current()
	if cur == nil {
		return nil
	}
	return slices.DeleteFunc(cur.Names(), func(n string) bool { return !s.Serves(n) })
}
