package service

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/fleet"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/runindex"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// fleetState is the API's view of the live fleet, bound on first use.
type fleetState struct {
	mu   sync.Mutex
	view *fleet.View
}

// fleetView binds the fleet registry (once).
func (a *API) fleetView(ctx context.Context) (*fleet.View, error) {
	a.fleet.mu.Lock()
	defer a.fleet.mu.Unlock()
	if a.fleet.view != nil {
		return a.fleet.view, nil
	}
	reg, err := fleet.Ensure(ctx, a.js, a.names, 1)
	if err != nil {
		return nil, err
	}
	a.fleet.view = fleet.NewView(reg, time.Second)
	return a.fleet.view, nil
}

// checkAgent accepts a submit for an agent the fleet knows: one a live
// worker serves, one some worker has served (its runs wait, queued, for
// a worker that serves it again: a rolling deploy), or one this API's
// catalog defines. The answer is the same on every API instance, whatever
// agents the process that answers serves.
func (a *API) checkAgent(ctx context.Context, agent string) error {
	if a.cfg.Catalog != nil {
		if _, ok := a.cfg.Catalog.Get(agent); ok {
			return nil
		}
	}
	var live []string
	if v, err := a.fleetView(ctx); err == nil {
		ok, names, err := v.Serves(ctx, agent)
		if err == nil && ok {
			return nil
		}
		live = names
	}
	known, _ := bus.AgentConsumers(ctx, a.js, a.names)
	if slices.Contains(known, agent) {
		return nil
	}
	if a.cfg.Catalog != nil {
		live = append(live, a.cfg.Catalog.Names()...)
	}
	return bus.UnknownAgentError(agent, live, a.registryFleet(ctx))
}

// checkScheduleAgent is checkAgent for a schedule's agent, which the
// agents registry may hold too (its fires wait, queued, for a worker
// serving the registry).
func (a *API) checkScheduleAgent(ctx context.Context, agent string) error {
	err := a.checkAgent(ctx, agent)
	if err == nil {
		return nil
	}
	if reg, rerr := a.agentsRegistry(ctx); rerr == nil {
		if _, gerr := reg.Get(ctx, agent); gerr == nil {
			return nil
		}
	}
	return err
}

// waiting says why a queued run of agent is not running, when no live
// worker serves agent ("" when one does, or the fleet cannot be read).
func (a *API) waiting(ctx context.Context, agent string) string {
	v, err := a.fleetView(ctx)
	if err != nil {
		return ""
	}
	ms, err := v.Members(ctx, false)
	if err != nil {
		return ""
	}
	for _, m := range ms {
		if m.Serves(agent) {
			return ""
		}
	}
	if a.registryFleet(ctx) {
		return fmt.Sprintf("no worker serves agent %q; the run starts when one does: lovia agents apply a file that defines it (or see the workers' logs for a tool or model they cannot provide)", agent)
	}
	return fmt.Sprintf("no worker serves agent %q; the run starts when a worker whose agents file defines it joins the fleet", agent)
}

// registryFleet reports whether agents come from the agents registry
// here: this API serves a registry worker (no catalog of its own), or the
// registry holds agents.
func (a *API) registryFleet(ctx context.Context) bool {
	if a.cfg.Catalog == nil {
		return true
	}
	reg, err := a.agentsRegistry(ctx)
	if err != nil {
		return false
	}
	es, err := reg.List(ctx)
	return err == nil && len(es) > 0
}

// FleetAgents lists the agents the live fleet serves (the union of every
// live worker's agents); with no live worker, this API's catalog's.
func (a *API) FleetAgents(ctx context.Context) (*bus.AgentsReply, error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	out := &bus.AgentsReply{Agents: []bus.AgentInfo{}}
	seen := map[string]bool{}
	if v, err := a.fleetView(ctx); err == nil {
		ms, err := v.Members(ctx, true)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			for _, in := range m.Agents {
				if !seen[in.Name] {
					seen[in.Name] = true
					out.Agents = append(out.Agents, in)
				}
			}
		}
	}
	if own := a.Agents(); own != nil {
		for _, in := range own.Agents {
			if !seen[in.Name] {
				seen[in.Name] = true
				out.Agents = append(out.Agents, in)
			}
		}
	}
	for i := range out.Agents {
		normalAgent(&out.Agents[i])
	}
	sort.Slice(out.Agents, func(i, j int) bool { return out.Agents[i].Name < out.Agents[j].Name })
	return out, nil
}

// agentVersions is m's version of each agent it announces (nil: none).
func agentVersions(m fleet.Member) map[string]string {
	var out map[string]string
	for _, in := range m.Agents {
		if in.Version != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[in.Name] = in.Version
		}
	}
	return out
}

// normalAgent gives in's lists their empty value when they have none (a
// worker's announcement may leave them out): the reply always has them.
// The announcing worker's version of the agent is left out: workers of
// several versions may serve it (the workers list gives each one's).
func normalAgent(in *bus.AgentInfo) {
	in.Version = ""
	if in.Tools == nil {
		in.Tools = []string{}
	}
	if in.Handoffs == nil {
		in.Handoffs = []string{}
	}
	if in.Schemas == nil {
		in.Schemas = []loop.ToolSchema{}
	}
}

// Workers lists the live workers of the fleet: the agents each serves,
// its runs in flight and its version. The runs in flight are the running
// runs the run index says the worker holds (it follows the run records
// as they change), else what the worker announced at its last refresh
// (every 2s), which lags a run that just ended.
func (a *API) Workers(ctx context.Context) (*bus.WorkersReply, error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	v, err := a.fleetView(ctx)
	if err != nil {
		return nil, err
	}
	ms, err := v.Members(ctx, true)
	if err != nil {
		return nil, err
	}
	out := &bus.WorkersReply{Workers: []bus.WorkerInfo{}}
	x, ierr := a.runIndex(ctx)
	now := time.Now()
	for _, m := range ms {
		agents := make([]string, 0, len(m.Agents))
		for _, in := range m.Agents {
			agents = append(agents, in.Name)
		}
		inFlight := m.InFlight
		if ierr == nil {
			if p, err := x.Query(runindex.Query{Worker: m.Worker, Statuses: []store.RunStatus{store.RunRunning}, Limit: 1}, now); err == nil {
				inFlight = p.Counts[store.RunRunning]
			}
		}
		out.Workers = append(out.Workers, bus.WorkerInfo{ID: m.Worker, Agents: agents, Concurrency: m.Concurrency,
			InFlight: inFlight, Version: m.Version, StartedAt: m.StartedAt, SeenAt: m.SeenAt, AgentVersions: agentVersions(m)})
	}
	return out, nil
}
