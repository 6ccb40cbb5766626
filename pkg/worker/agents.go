package worker

import (
	"context"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/fleet"
)

// AgentSource provides agents that change while the worker runs: the
// agents registry (registry.Source). Runs pin the revision they started
// with, and a resume builds the agents of that revision.
type AgentSource interface {
	// Current is the catalog of the current revision.
	Current() (*catalog.Catalog, uint64)
	// At is the catalog of revision rev.
	At(ctx context.Context, rev uint64) (*catalog.Catalog, error)
	// Changes signals that Current changed.
	Changes() <-chan struct{}
	// Serves reports whether this worker serves (claims runs of) agent.
	Serves(agent string) bool
}

// agents returns the worker's current catalog and its registry revision
// (0 for a fixed agents file).
func (w *Worker) agents() (*catalog.Catalog, uint64) {
	if w.cfg.Agents != nil {
		return w.cfg.Agents.Current()
	}
	return w.cfg.Catalog, 0
}

// served lists the agents this worker claims runs of.
func (w *Worker) served() []string {
	cat, _ := w.agents()
	if cat == nil {
		return nil
	}
	names := cat.Names()
	if w.cfg.Agents != nil {
		names = slices.DeleteFunc(names, func(n string) bool { return !w.cfg.Agents.Serves(n) })
	}
	return names
}

// pinned returns the agent a claimed run runs: the one of the registry
// revision its submission is pinned to, when that is not the current one.
func (w *Worker) pinned(ctx context.Context, x *execution, rev uint64) error {
	if w.cfg.Agents == nil || rev == 0 {
		return nil
	}
	if _, cur := w.cfg.Agents.Current(); cur == rev {
		return nil
	}
	cat, err := w.cfg.Agents.At(ctx, rev)
	if err != nil {
		return err
	}
	ag, ok := cat.Get(x.ag.Name)
	if !ok {
		x.d.log.Warn("the run's agent is missing from its pinned registry revision (past the history kept?); running the current definition", "revision", rev)
		return nil
	}
	x.ag = ag
	x.d.log.Debug("running the agent of the run's pinned registry revision", "revision", rev)
	return nil
}

// syncClaimers starts a claim loop for every agent the worker serves that
// has none (creating its consumer when missing) and stops the loops of
// agents it no longer serves.
func (w *Worker) syncClaimers(ctx context.Context) error {
	want := w.served()
	w.claimMu.Lock()
	defer w.claimMu.Unlock()
	for agent, stop := range w.claimStops {
		if !slices.Contains(want, agent) {
			stop()
			delete(w.claimStops, agent)
			w.log.Info("no longer serving agent", "agent", agent)
		}
	}
	var missing []string
	for _, agent := range want {
		if _, ok := w.claimStops[agent]; !ok {
			missing = append(missing, agent)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := bus.ProvisionAgents(ctx, w.js, w.cfg.Provision, missing, w.cfg.SkipProvision); err != nil {
		return err
	}
	for _, agent := range missing {
		name, err := w.names.AgentConsumer(agent)
		if err != nil {
			return err
		}
		c, err := w.js.Consumer(ctx, w.names.RunsStream(), name)
		if err != nil {
			return err
		}
		w.startClaimer(agent, c)
	}
	return nil
}

// startClaimer starts the claim loop of one agent (w.claimMu held).
func (w *Worker) startClaimer(agent string, c jetstream.Consumer) {
	lctx, stop := context.WithCancel(w.claimCtx)
	w.claimStops[agent] = stop
	w.claimers.Add(1)
	go w.claimLoop(lctx, agent, c)
}

// followAgents applies the agent source's changes until ctx ends: claim
// loops for the agents served now, and the fleet announcement.
func (w *Worker) followAgents(ctx context.Context) {
	defer close(w.followDone)
	retry := time.NewTicker(w.cfg.FetchTimeout)
	defer retry.Stop()
	failed := false
	sync := func() {
		err := w.syncClaimers(ctx)
		failed = err != nil
		if failed && ctx.Err() == nil {
			w.log.Warn("serving the agents of a registry change failed; retrying", "error", err)
		}
		w.ann.Update(w.member())
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.cfg.Agents.Changes():
			sync()
		case <-retry.C:
			if failed {
				sync()
			}
		}
	}
}

// member is this worker's fleet announcement: the agents it claims runs
// of (with a registry, those whose claim loop runs).
func (w *Worker) member() fleet.Member {
	cat, _ := w.agents()
	infos := cat.AgentInfos()
	served := w.served()
	if w.cfg.Agents != nil {
		w.claimMu.Lock()
		served = slices.DeleteFunc(served, func(n string) bool { _, ok := w.claimStops[n]; return !ok })
		w.claimMu.Unlock()
	}
	infos = slices.DeleteFunc(infos, func(in bus.AgentInfo) bool { return !slices.Contains(served, in.Name) })
	return fleet.Member{Worker: w.cfg.ID, Agents: infos, Concurrency: w.cfg.Concurrency, StartedAt: w.started0, Version: buildVersion()}
}

// inFlight counts the runs the worker executes now.
func (w *Worker) inFlight() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.active)
}

// buildVersion is the binary's main module version and VCS revision.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
	}
	return strings.TrimSpace(v)
}

// Agents lists the agents the worker serves now (claims runs of).
func (w *Worker) Agents() []string { return w.served() }
