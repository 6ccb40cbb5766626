package service

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/registry"
)

// registryState is the API's agents registry, bound on first use.
type registryState struct {
	mu  sync.Mutex
	reg *registry.Registry
}

func (a *API) agentsRegistry(ctx context.Context) (*registry.Registry, error) {
	a.registry.mu.Lock()
	defer a.registry.mu.Unlock()
	if a.registry.reg != nil {
		return a.registry.reg, nil
	}
	reg, err := registry.Ensure(ctx, a.js, a.names, 0)
	if err != nil {
		return nil, err
	}
	a.registry.reg = reg
	return reg, nil
}

func registryErr(err error) error {
	if errors.Is(err, registry.ErrNotFound) {
		return &bus.APIError{Type: bus.TypeNotFound, Message: err.Error(), Hint: "list the registry's agents with lovia agents ls (or <p>.api.registry.list)"}
	}
	return err
}

// RegistryApply applies an agents file to the agents registry, validated
// with Config.AgentOptions (the agents file's rules: unknown fields,
// tools, models, handoffs), and reports which applied agents no live
// worker serves yet.
func (a *API) RegistryApply(ctx context.Context, req *bus.RegistryApplyRequest) (*bus.RegistryApplyReply, error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	if err := req.Validate(); err != nil {
		return nil, err
	}
	f, err := catalog.Decode([]byte(req.File))
	if err != nil {
		return nil, &bus.APIError{Type: bus.TypeInvalidRequest, Message: "agents file: " + err.Error(), Hint: "fix the agents file (the same schema as lovia worker --agents)"}
	}
	if len(f.MCPServers) > 0 {
		return nil, &bus.APIError{Type: bus.TypeInvalidRequest, Message: "the agents file declares mcp_servers: the registry holds agents only",
			Hint: "declare MCP servers in the workers' agents file (lovia worker --agents); registry agents may name their tools"}
	}
	reg, err := a.agentsRegistry(ctx)
	if err != nil {
		return nil, err
	}
	rep, err := reg.Apply(ctx, f.Agents, req.Prune, a.cfg.AgentOptions)
	if err != nil {
		if rep == nil {
			return nil, &bus.APIError{Type: bus.TypeInvalidRequest, Message: err.Error(), Hint: "fix the agents file; nothing was written"}
		}
		return nil, err
	}
	out := &bus.RegistryApplyReply{Created: nonNil(rep.Created), Updated: nonNil(rep.Updated), Unchanged: nonNil(rep.Unchanged),
		Deleted: nonNil(rep.Deleted), Revision: rep.Revision}
	if v, err := a.fleetView(ctx); err == nil {
		if ms, err := v.Members(ctx, true); err == nil {
			for _, s := range f.Agents {
				served := false
				for _, m := range ms {
					served = served || m.Serves(s.Name)
				}
				if !served {
					out.Unserved = append(out.Unserved, s.Name)
				}
			}
		}
	}
	return out, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func toWire(e registry.Entry) bus.RegistryAgent {
	out := bus.RegistryAgent{Name: e.Spec.Name, Revision: e.Revision, Created: e.Created, Deleted: e.Deleted}
	if !e.Deleted {
		out.Spec, _ = json.Marshal(e.Spec)
	}
	return out
}

// RegistryList lists the registry's agents with the live workers serving
// each.
func (a *API) RegistryList(ctx context.Context) (*bus.RegistryAgentsReply, error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	reg, err := a.agentsRegistry(ctx)
	if err != nil {
		return nil, err
	}
	es, err := reg.List(ctx)
	if err != nil {
		return nil, err
	}
	served := map[string]int{}
	if v, err := a.fleetView(ctx); err == nil {
		if ms, err := v.Members(ctx, true); err == nil {
			for _, m := range ms {
				for _, in := range m.Agents {
					served[in.Name]++
				}
			}
		}
	}
	out := &bus.RegistryAgentsReply{Agents: []bus.RegistryAgent{}}
	for _, e := range es {
		w := toWire(e)
		n := served[e.Spec.Name]
		w.Workers = &n
		out.Agents = append(out.Agents, w)
	}
	return out, nil
}

// registryCall runs f on the agents registry for a request naming an
// agent, on the API's timeout.
func registryCall[T any](ctx context.Context, a *API, req *bus.RegistryGetRequest, f func(context.Context, *registry.Registry) (T, error)) (T, error) {
	var zero T
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	if err := req.Validate(); err != nil {
		return zero, err
	}
	reg, err := a.agentsRegistry(ctx)
	if err != nil {
		return zero, err
	}
	v, err := f(ctx, reg)
	if err != nil {
		return zero, registryErr(err)
	}
	return v, nil
}

// RegistryGet returns an agent's definition, current or at a revision.
func (a *API) RegistryGet(ctx context.Context, req *bus.RegistryGetRequest) (*bus.RegistryAgent, error) {
	return registryCall(ctx, a, req, func(ctx context.Context, reg *registry.Registry) (*bus.RegistryAgent, error) {
		get := func() (*registry.Entry, error) { return reg.Get(ctx, req.Name) }
		if req.Revision != 0 {
			get = func() (*registry.Entry, error) { return reg.GetRevision(ctx, req.Name, req.Revision) }
		}
		e, err := get()
		if err != nil {
			return nil, err
		}
		w := toWire(*e)
		return &w, nil
	})
}

// RegistryHistory lists an agent's revisions, oldest first.
func (a *API) RegistryHistory(ctx context.Context, req *bus.RegistryGetRequest) (*bus.RegistryAgentsReply, error) {
	return registryCall(ctx, a, req, func(ctx context.Context, reg *registry.Registry) (*bus.RegistryAgentsReply, error) {
		h, err := reg.History(ctx, req.Name)
		if err != nil {
			return nil, err
		}
		out := &bus.RegistryAgentsReply{Agents: make([]bus.RegistryAgent, 0, len(h))}
		for _, e := range h {
			out.Agents = append(out.Agents, toWire(e))
		}
		return out, nil
	})
}

// RegistryRemove deletes an agent from the registry (runs in flight keep
// their pinned definition).
func (a *API) RegistryRemove(ctx context.Context, req *bus.RegistryGetRequest) (*bus.RegistryAgent, error) {
	return registryCall(ctx, a, req, func(ctx context.Context, reg *registry.Registry) (*bus.RegistryAgent, error) {
		if err := reg.Remove(ctx, req.Name); err != nil {
			return nil, err
		}
		return &bus.RegistryAgent{Name: req.Name, Deleted: true}, nil
	})
}
