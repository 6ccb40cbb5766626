package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/fleet"
	"github.com/lovia-fleet/lovia/pkg/lifecycle"
	"github.com/lovia-fleet/lovia/pkg/store"
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
	// Removed reports whether the source removed agent (it has no
	// current definition, and had one): its runs in flight still resume
	// from their pinned revision, on any worker that Serves it.
	Removed(ctx context.Context, agent string) (bool, error)
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
// agents it no longer serves — except for an agent the registry removed
// while its consumer still holds requests (removedInFlight): its loop
// goes on (or starts: a worker started after the removal) until they are
// all settled, so a run in flight of a removed agent resumes from its
// pinned revision on any worker when its holder dies, and one that never
// started ends (see removedAgent).
func (w *Worker) syncClaimers(ctx context.Context) error {
	want := w.served()
	drain, drainErr := w.removedInFlight(ctx, want)
	w.claimMu.Lock()
	defer w.claimMu.Unlock()
	for agent, stop := range w.claimStops {
		switch {
		case slices.Contains(want, agent):
			delete(w.draining, agent)
			continue
		case drain[agent], drainErr != nil && w.draining[agent]:
			if !w.draining[agent] {
				w.draining[agent] = true
				w.log.Info("agent removed from the registry; still resuming its runs in flight", "agent", agent)
			}
			continue
		case drainErr != nil:
			continue // cannot tell whether it has runs in flight: ask again
		}
		stop()
		delete(w.claimStops, agent)
		if w.draining[agent] {
			delete(w.draining, agent)
			w.log.Info("no runs of the removed agent left; no longer claiming its runs", "agent", agent)
		} else {
			w.log.Info("no longer serving agent", "agent", agent)
		}
	}
	var missing, resumed []string
	for _, agent := range want {
		if _, ok := w.claimStops[agent]; !ok {
			missing = append(missing, agent)
		}
	}
	for agent := range drain {
		if _, ok := w.claimStops[agent]; !ok {
			resumed = append(resumed, agent)
		}
	}
	if len(missing) > 0 {
		if err := bus.ProvisionAgents(ctx, w.js, w.cfg.Provision, missing, w.cfg.SkipProvision); err != nil {
			return err
		}
	}
	for _, agent := range append(missing, resumed...) {
		name, err := w.names.AgentConsumer(agent)
		if err != nil {
			return err
		}
		c, err := w.js.Consumer(ctx, w.names.RunsStream(), name)
		if err != nil {
			return err
		}
		if slices.Contains(resumed, agent) {
			w.draining[agent] = true
			w.log.Info("claiming the runs in flight of an agent removed from the registry", "agent", agent)
		}
		w.startClaimer(agent, c)
	}
	return drainErr
}

// removedInFlight lists the agents this worker would serve, not in want
// (its current catalog), that the registry removed while their consumer
// holds requests: runs in flight (on this worker or another, live or
// dead) and runs that never started.
func (w *Worker) removedInFlight(ctx context.Context, want []string) (map[string]bool, error) {
	if w.cfg.Agents == nil {
		return nil, nil
	}
	cctx, cancel := context.WithTimeout(ctx, w.cfg.StoreTimeout)
	defer cancel()
	backlogs, err := bus.AgentBacklogs(cctx, w.js, w.names)
	if err != nil {
		return nil, fmt.Errorf("list the agents' consumers: %w", err)
	}
	out := map[string]bool{}
	for agent, n := range backlogs {
		if n == 0 || slices.Contains(want, agent) || !w.cfg.Agents.Serves(agent) {
			continue
		}
		removed, err := w.cfg.Agents.Removed(cctx, agent)
		if err != nil {
			return nil, fmt.Errorf("agent %s: %w", agent, err)
		}
		if removed {
			out[agent] = true
		}
	}
	return out, nil
}

// removedAgent is the agent to run a request of an agent missing from the
// worker's current catalog with. A run in flight — claimed before, its
// submission pinned to a registry revision — runs that revision's
// definition: the registry may have removed the agent since ("its runs in
// flight keep their pinned definition"). A run that never started, of an
// agent the registry removed and no other live worker serves, ends with
// run_failed UnknownAgent: it was accepted, and nothing would ever run it.
// Any other request is released for a worker that serves its agent. ok
// false: the delivery is settled.
func (w *Worker) removedAgent(ctx context.Context, d *delivery, runID, agent string, enc bus.Encoding) (ag *catalog.Agent, rev uint64, ok bool) {
	release := func(why string, delay time.Duration) {
		d.log.Info(why+"; released for a worker that serves it", "agent", agent)
		w.settleMsg(ctx, d, lifecycle.Verdict{Settle: lifecycle.Nak, Delay: delay})
	}
	if w.cfg.Agents == nil || !w.cfg.Agents.Serves(agent) {
		// Routed by agent, a run reaches only a worker that serves its
		// agent; this one stopped serving it a moment ago. It is never
		// failed for reaching the wrong worker.
		release("a run of an agent this worker no longer serves", 5*time.Second)
		return nil, 0, false
	}
	e, err := w.st.Runs().Get(ctx, runID)
	switch {
	case err == nil && e.Record.Registry != 0 && !e.Record.Status.Ended():
		cat, err := w.cfg.Agents.At(ctx, e.Record.Registry)
		if err != nil {
			d.log.Warn("the agents of the run's pinned registry revision cannot be built; releasing the run", "revision", e.Record.Registry, "error", err)
			w.settleMsg(ctx, d, lifecycle.Verdict{Settle: lifecycle.Nak, Delay: w.cfg.ReconnectGrace})
			return nil, 0, false
		}
		if ag, ok := cat.Get(agent); ok {
			d.log.Info("resuming a run of an agent no longer in the registry, from its pinned revision", "revision", e.Record.Registry)
			return ag, e.Record.Registry, true
		}
		release("the run's agent is missing from its pinned registry revision (past the history kept, or this worker cannot build it)", 5*time.Second)
		return nil, 0, false
	case err != nil && !errors.Is(err, store.ErrRunNotFound):
		d.log.Warn("reading the run's record failed; releasing the run", "error", err)
		w.settleMsg(ctx, d, lifecycle.Verdict{Settle: lifecycle.Nak, Delay: time.Second})
		return nil, 0, false
	}
	removed, err := w.cfg.Agents.Removed(ctx, agent)
	if err != nil || !removed || w.servedElsewhere(ctx, agent) {
		release("a run of an agent not in this worker's registry revision yet", 5*time.Second)
		return nil, 0, false
	}
	w.poison(ctx, d, runID, agent, enc, bus.TypeUnknownAgent,
		fmt.Sprintf("agent %q was removed from the agents registry before the run started", agent),
		"apply a definition of it again (lovia agents apply FILE) and submit the run again")
	return nil, 0, false
}

// servedElsewhere reports whether another live worker announces agent (a
// worker of an agents file that defines it); true when the fleet cannot
// be read.
func (w *Worker) servedElsewhere(ctx context.Context, agent string) bool {
	mctx, cancel := context.WithTimeout(ctx, w.cfg.StoreTimeout)
	defer cancel()
	ms, err := w.fleet.Members(mctx)
	if err != nil {
		return true
	}
	return slices.ContainsFunc(ms, func(m fleet.Member) bool { return m.Worker != w.cfg.ID && m.Serves(agent) })
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
	// Removed agents with runs in flight are found (and their loops ended
	// once drained) every SweepInterval, and at once: a worker started
	// after the removal.
	drains := time.NewTicker(w.cfg.SweepInterval)
	defer drains.Stop()
	failed := false
	sync := func(announce bool) {
		// After a failed sync, loops of served agents may start now.
		announce = announce || failed
		err := w.syncClaimers(ctx)
		failed = err != nil
		if failed && ctx.Err() == nil {
			w.log.Warn("serving the agents of a registry change failed; retrying", "error", err)
		}
		if announce {
			w.ann.Update(w.member())
		}
	}
	sync(false) // Start announced its agents
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.cfg.Agents.Changes():
			sync(true)
		case <-drains.C:
			sync(false) // the announced agents are the catalog's: unchanged
		case <-retry.C:
			if failed {
				sync(true)
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
	m := fleet.Member{Worker: w.cfg.ID, Agents: infos, Concurrency: w.cfg.Concurrency, StartedAt: w.started0, Version: buildVersion()}
	w.memberVersions(&m)
	return m
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
