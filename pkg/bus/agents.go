package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// Routing by agent. Every agent has its own durable pull consumer on the
// runs stream (Names.AgentConsumer: agent-<name>, filtered on
// <p>.submit.<name>), created by the first worker that serves the agent and
// shared by every worker that does. A worker fetches only from the
// consumers of its agents, so it never receives a run it cannot execute;
// a run of an agent no live worker serves stays in the work queue
// (queued), and a worker started later with that agent claims it. The
// runs stream is a work queue, whose consumers may not overlap: per-agent
// filters never do. (A partitioned design — N consumers over hashed run
// ids — balances load but not capability, and would still deliver a run
// to a worker that does not serve its agent.)
//
// The consumer settings of ProvisionConfig.Workers (ack wait, max
// deliver, max ack pending) apply to every agent's consumer: MaxAckPending
// is how many runs of one agent the fleet holds at once.

// ProvisionAgents creates or updates the consumers of the given agents
// with the settings of cfg.Workers, after deleting the consumer of earlier
// releases, which overlaps them. A consumer it creates takes the unset
// settings (ack wait, max ack pending) from another agent's consumer — what
// the fleet has — or the defaults in a new fleet. With onlyMissing it
// leaves existing consumers alone (a worker started with SkipProvision).
// It retries the transient errors of a cluster that is still forming, as
// Provision does.
func ProvisionAgents(ctx context.Context, js jetstream.JetStream, cfg ProvisionConfig, agents []string, onlyMissing bool) error {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	names, _ := NewNames(cfg.Prefix)
	p := &provisioner{js: js, cfg: cfg, report: &ProvisionReport{}}
	if !onlyMissing {
		if err := p.dropLegacyConsumer(ctx, names); err != nil {
			return err
		}
	}
	fleetWide := false
	for _, agent := range agents {
		want, err := agentConsumerConfig(names, p.cfg, agent)
		if err != nil {
			return err
		}
		err = p.retry(ctx, func() (bool, error) {
			cctx, cancel := withDefaultTimeout(ctx, p.cfg.Timeout)
			defer cancel()
			_, err := js.Consumer(cctx, names.RunsStream(), want.Durable)
			switch {
			case errors.Is(err, jetstream.ErrConsumerNotFound):
				if !fleetWide {
					fleetWide = true
					p.adoptFleetSettings(ctx, names)
					want, _ = agentConsumerConfig(names, p.cfg, agent)
				}
			case err != nil:
				return false, err
			case onlyMissing:
				return true, nil
			}
			err = p.consumer(ctx, names.RunsStream(), want)
			return err == nil, err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// adoptFleetSettings fills the unset consumer settings of p.cfg from an
// existing agent consumer.
func (p *provisioner) adoptFleetSettings(ctx context.Context, names Names) {
	agents, err := AgentConsumers(ctx, p.js, names)
	if err != nil || len(agents) == 0 {
		return
	}
	name, _ := names.AgentConsumer(agents[0])
	c, err := p.js.Consumer(ctx, names.RunsStream(), name)
	if err != nil {
		return
	}
	have := c.CachedInfo().Config
	if p.cfg.Workers.AckWait == 0 {
		p.cfg.Workers.AckWait = have.AckWait
	}
	if p.cfg.Workers.MaxAckPending == 0 {
		p.cfg.Workers.MaxAckPending = have.MaxAckPending
	}
}

func agentConsumerConfig(n Names, c ProvisionConfig, agent string) (jetstream.ConsumerConfig, error) {
	name, err := n.AgentConsumer(agent)
	if err != nil {
		return jetstream.ConsumerConfig{}, err
	}
	subject, _ := n.Submit(agent)
	want := workersConsumerConfig(n, c)
	want.Durable, want.FilterSubject = name, subject
	want.Description = "Lovia workers: claim the run requests of agent " + agent
	return want, nil
}

// AgentConsumers lists the agents that have a consumer on the runs stream:
// every agent some worker of the fleet has served.
func AgentConsumers(ctx context.Context, js jetstream.JetStream, names Names) ([]string, error) {
	s, err := js.Stream(ctx, names.RunsStream())
	if err != nil {
		return nil, err
	}
	lister := s.ConsumerNames(ctx)
	var out []string
	for name := range lister.Name() {
		if agent, ok := ParseAgentConsumer(name); ok {
			out = append(out, agent)
		}
	}
	return out, lister.Err()
}

// AgentBacklogs maps every agent that has a consumer on the runs stream
// to the requests its consumer holds: those waiting to be delivered plus
// those delivered and not yet acknowledged (runs in flight on some worker,
// live or dead). One listing of the stream's consumers.
func AgentBacklogs(ctx context.Context, js jetstream.JetStream, names Names) (map[string]uint64, error) {
	s, err := js.Stream(ctx, names.RunsStream())
	if err != nil {
		return nil, err
	}
	lister := s.ListConsumers(ctx)
	out := map[string]uint64{}
	for ci := range lister.Info() {
		if agent, ok := ParseAgentConsumer(ci.Name); ok {
			out[agent] = ci.NumPending + uint64(max(ci.NumAckPending, 0))
		}
	}
	return out, lister.Err()
}

// reconcileAgentConsumers applies cfg.Workers to the consumer of every
// agent the fleet has served (Provision with !SkipWorkers).
func (p *provisioner) reconcileAgentConsumers(ctx context.Context, names Names) error {
	if err := p.dropLegacyConsumer(ctx, names); err != nil {
		return err
	}
	var agents []string
	err := p.retry(ctx, func() (bool, error) {
		var err error
		agents, err = AgentConsumers(ctx, p.js, names)
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("bus: provision: list the agent consumers of %s: %w", names.RunsStream(), err)
	}
	for _, agent := range agents {
		want, err := agentConsumerConfig(names, p.cfg, agent)
		if err != nil {
			continue
		}
		if err := p.retry(ctx, func() (bool, error) {
			err := p.consumer(ctx, names.RunsStream(), want)
			return err == nil, err
		}); err != nil {
			return err
		}
	}
	return nil
}

// dropLegacyConsumer deletes the unfiltered workers consumer of earlier
// releases: a work-queue stream refuses consumers that overlap it.
func (p *provisioner) dropLegacyConsumer(ctx context.Context, names Names) error {
	return p.retry(ctx, func() (bool, error) {
		cctx, cancel := withDefaultTimeout(ctx, p.cfg.Timeout)
		defer cancel()
		err := p.js.DeleteConsumer(cctx, names.RunsStream(), names.WorkersConsumer())
		switch {
		case err == nil:
			p.cfg.Logger.Warn("bus: deleted the workers consumer of an earlier release; runs are claimed through one consumer per agent now",
				"consumer", names.RunsStream()+"/"+names.WorkersConsumer())
			return true, nil
		case errors.Is(err, jetstream.ErrConsumerNotFound), strings.Contains(err.Error(), "consumer not found"):
			return true, nil
		}
		return false, err
	})
}
