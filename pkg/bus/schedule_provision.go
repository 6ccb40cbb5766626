package bus

import (
	"context"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// schedulesStreamConfig holds schedule messages (<p>.schedule.<name>, one
// per name: the server rolls a schedule's subject up) and their fires
// (<p>.fire.<agent>). The server fires only to subjects of the schedule's
// own stream and refuses schedules on a DiscardNew stream, which the runs
// stream is (a full queue refuses new runs rather than drop waiting ones),
// so schedules live here and the runs stream sources the fires (see
// EnsureScheduleSource).
//
// Schedule messages carry Nats-TTL: never, so MaxAge (Runs.MaxAge) drops
// only fires, which the runs stream has copied long before.
func schedulesStreamConfig(n Names, c ProvisionConfig) jetstream.StreamConfig {
	dup := c.Runs.Duplicates
	if c.Runs.MaxAge > 0 && dup > c.Runs.MaxAge {
		dup = c.Runs.MaxAge
	}
	return jetstream.StreamConfig{
		Name:              n.SchedulesStream(),
		Description:       "Lovia schedules and their fires (sourced into " + n.RunsStream() + ")",
		Subjects:          []string{n.ScheduleWildcard(), n.FireWildcard()},
		Retention:         jetstream.LimitsPolicy,
		Storage:           c.Storage,
		Replicas:          c.Replicas,
		Discard:           jetstream.DiscardOld,
		MaxAge:            c.Runs.MaxAge,
		MaxBytes:          -1,
		MaxMsgs:           -1,
		MaxMsgsPerSubject: -1,
		MaxMsgSize:        c.Runs.MaxMsgSize,
		Duplicates:        dup,
		AllowDirect:       true,
		AllowRollup:       true,
		AllowMsgTTL:       true,
		AllowMsgSchedules: true,
	}
}

// scheduleFireSources makes the runs stream copy every fire
// (<p>.fire.<agent>) as a run request on <p>.submit.<agent>.
func scheduleFireSources(n Names) []*jetstream.StreamSource {
	return []*jetstream.StreamSource{{
		Name: n.SchedulesStream(),
		SubjectTransforms: []jetstream.SubjectTransformConfig{{
			Source:      n.FireWildcard(),
			Destination: n.Prefix() + "." + tokSubmit + ".{{wildcard(1)}}",
		}},
	}}
}

// EnsureScheduleSource makes the runs stream source the schedules' fires
// (<p>.fire.<agent> as <p>.submit.<agent>), adding the source when it is
// missing and keeping any others an operator added. The schedule Manager
// calls it before it adds or resumes a schedule, so a fleet that never
// schedules anything runs no source consumer; once added, Provision keeps
// it. The source copies the fires already stored too: their run ids are
// the fires' own, so a copy of a fire already run is that run again, not a
// new one.
func EnsureScheduleSource(ctx context.Context, js jetstream.JetStream, names Names) error {
	ctx, cancel := withDefaultTimeout(ctx, DefaultProvisionTimeout)
	defer cancel()
	s, err := js.Stream(ctx, names.RunsStream())
	if err != nil {
		return fmt.Errorf("bus: the schedules' source on %s: %w", names.RunsStream(), streamMissing(err, names.RunsStream()))
	}
	cfg := s.CachedInfo().Config
	var changed []string
	reconcileSources(&changed, &cfg, scheduleFireSources(names))
	if len(changed) == 0 {
		return nil
	}
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("bus: add the schedules' source to %s: %w", names.RunsStream(), err)
	}
	return nil
}

// reconcileSources adds the sources want names (by stream name and
// transforms) that have lacks, keeping any others an operator added.
func reconcileSources(changed *[]string, have *jetstream.StreamConfig, want []*jetstream.StreamSource) {
	for _, w := range want {
		if slices.ContainsFunc(have.Sources, func(h *jetstream.StreamSource) bool { return sameSource(h, w) }) {
			continue
		}
		// Drop another source of the same stream (other transforms): two
		// sources of one stream would copy each fire twice.
		have.Sources = slices.DeleteFunc(slices.Clone(have.Sources), func(h *jetstream.StreamSource) bool { return h.Name == w.Name })
		have.Sources = append(have.Sources, w)
		*changed = append(*changed, fmt.Sprintf("sources: + %s", w.Name))
	}
}

func sameSource(a, b *jetstream.StreamSource) bool {
	if a == nil || b == nil || a.Name != b.Name || a.FilterSubject != b.FilterSubject || len(a.SubjectTransforms) != len(b.SubjectTransforms) {
		return false
	}
	for i := range a.SubjectTransforms {
		if a.SubjectTransforms[i] != b.SubjectTransforms[i] {
			return false
		}
	}
	return true
}
