package worker

import (
	"context"
	"regexp"
	"time"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/fleet"
	"github.com/lovia-fleet/lovia/pkg/lifecycle"
)

// Agent versions. A run records the version of its agent it started on
// (the claiming worker's: catalog.VersionOf, the definition's digest plus
// Config.BuildID); each claim step records the claimer's, and run_started
// and run_resumed carry them. Workers announce their version of each agent
// in the fleet registry. A worker that claims the resume of a run started
// on another version gives it back (a NAK after versionGiveBack) while a
// live worker announcing that version, with a free slot, serves the
// agent: in a rolling deploy old runs finish on old workers. Routing is
// bounded twice over: by the old version's liveness (once none of its
// workers is live, or none has room, the claimer resumes the run, and its
// history and run_resumed say so), and by the request's deliveries (each
// give-back is one; a request keeps versionReserve of them for crashes).

// versionGiveBack is the delay of a give-back NAK: short, the run is not
// delayed much, and the other workers' waiting fetches are first in line
// for it.
const versionGiveBack = 200 * time.Millisecond

// versionReserve is how many of a request's deliveries (the workers
// consumer's MaxDeliver) a give-back leaves for crash redeliveries.
const versionReserve = 3

// buildIDRE is what Config.BuildID may be (it joins a version string).
var buildIDRE = regexp.MustCompile(`^[A-Za-z0-9._-]{0,64}$`)

// ValidBuildID reports whether id may be a Config.BuildID: up to 64
// characters of [A-Za-z0-9._-].
func ValidBuildID(id string) bool { return buildIDRE.MatchString(id) }

// versionOf is this worker's version of agent ag.
func (w *Worker) versionOf(ag *catalog.Agent) string {
	return catalog.VersionOf(ag, w.cfg.BuildID)
}

// versionClaim sets c's version fields for a claim of delivery d of a run
// of ag: the worker's version, and whether it routes the resume by
// version (not when turned off, for registry agents, or once the request
// has used its give-backs).
func (w *Worker) versionClaim(c *lifecycle.Claim, d *delivery, ag *catalog.Agent) {
	c.Version = w.versionOf(ag)
	if w.cfg.ResumeAnyVersion || w.cfg.Agents != nil {
		return
	}
	limit := w.cfg.Provision.Workers.MaxDeliver
	if limit == 0 {
		limit = bus.DefaultWorkersMaxDeliver
	}
	if limit > 0 && d.meta != nil && int(d.meta.NumDelivered)+versionReserve >= limit {
		return
	}
	c.RouteVersions = true
}

// versionLive reports whether another live worker than gone (the run's
// last holder, which released it or died: its announcement may not have
// expired yet)
// announces version of agent and has a free slot; false when the fleet
// cannot be read (the claimer resumes the run rather than bounce it
// blindly).
func (w *Worker) versionLive(ctx context.Context, agent, version, gone string) bool {
	mctx, cancel := context.WithTimeout(ctx, w.cfg.StoreTimeout)
	defer cancel()
	ms, err := w.fleet.Members(mctx)
	if err != nil {
		return false
	}
	for _, m := range ms {
		if m.Worker != w.cfg.ID && m.Worker != gone && m.ServesVersion(agent, version) && (m.Concurrency == 0 || m.InFlight < m.Concurrency) {
			return true
		}
	}
	return false
}

// versions are the agent versions of one execution, for its run_started
// or run_resumed.
type versions struct {
	version, started, previous string
}

// memberVersions sets the version of each agent of a fleet announcement.
func (w *Worker) memberVersions(m *fleet.Member) {
	cat, _ := w.agents()
	for i := range m.Agents {
		if ag, ok := cat.Get(m.Agents[i].Name); ok {
			m.Agents[i].Version = w.versionOf(ag)
		}
	}
}

// giveBack decides on the resume of a run of agent that started on
// version started, which this worker (of version own) was refused
// (lifecycle.ErrOtherVersion); last is the run's last holder, which gave
// it up (it stops, or it is gone): give it back, with a short NAK, while
// another live worker of that version can take it; back is false when
// none can, and the worker resumes the run itself.
func (w *Worker) giveBack(ctx context.Context, d *delivery, agent, started, own, last string) (v lifecycle.Verdict, back bool) {
	if !w.versionLive(ctx, agent, started, last) {
		d.log.Info("the run started on another version of its agent, and no live worker of it can take it; resuming it here",
			"started_version", started, "version", own)
		return lifecycle.Verdict{}, false
	}
	d.log.Info("the run started on another version of its agent; giving it back to a worker of that version",
		"started_version", started, "version", own)
	return lifecycle.Verdict{Settle: lifecycle.Nak, Delay: versionGiveBack, Reason: "a worker of the run's version " + started + " serves it"}, true
}
