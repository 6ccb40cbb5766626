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
	return bus.UnknownAgentError(agent, live)
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
	return fmt.Sprintf("no worker serves agent %q; the run starts when a worker whose agents file defines it joins the fleet", agent)
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

// normalAgent gives in's lists their empty value when they have none (a
// worker's announcement may leave them out): the reply always has them.
func normalAgent(in *bus.AgentInfo) {
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
// its runs in flight (at its last refresh, every 2s) and its version.
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
	for _, m := range ms {
		agents := make([]string, 0, len(m.Agents))
		for _, in := range m.Agents {
			agents = append(agents, in.Name)
		}
		out.Workers = append(out.Workers, bus.WorkerInfo{ID: m.Worker, Agents: agents, Concurrency: m.Concurrency,
			InFlight: m.InFlight, Version: m.Version, StartedAt: m.StartedAt, SeenAt: m.SeenAt})
	}
	return out, nil
}
