package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ProvisionReport lists what Provision did, by stream or consumer name.
type ProvisionReport struct {
	Created   []string
	Updated   []string
	Unchanged []string
}

// Provision creates or updates, idempotently, every stream and bucket of
// docs/protocol.md and the workers consumer, with settings from cfg. Run it at
// startup from any number of processes at once: an asset that already
// matches is left alone, one that differs in settings the server can change
// is updated (settings Provision does not own, such as placement or
// metadata, are kept), and one that differs in settings the server cannot
// change (retention, storage; the workers consumer's ack, deliver and
// replay policies and MaxWaiting) stops Provision with an
// *IncompatibleError naming the stream and the differences.
func Provision(ctx context.Context, js jetstream.JetStream, cfg ProvisionConfig) (*ProvisionReport, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	names, _ := NewNames(cfg.Prefix)
	p := &provisioner{js: js, cfg: cfg, report: &ProvisionReport{}}
	streams := []jetstream.StreamConfig{runsStreamConfig(names, cfg), schedulesStreamConfig(names, cfg), eventsStreamConfig(names, cfg), deadLetterStreamConfig(names, cfg)}
	// Checkpoints and sessions are read by a resuming or starting run, which
	// must see the latest head and every segment, and the run index (with
	// the approval decisions and park records) decides claims, parks and
	// wakes, which must see each other's writes: their reads go to the
	// stream leader. Direct gets, which any replica may answer (and a
	// lagging one answers stale), serve the mailbox, whose reads go
	// through the leader anyway (listings) or are re-checked.
	for _, b := range []struct {
		name   string
		cfg    BucketConfig
		direct bool
	}{
		{names.SessionsBucket(), cfg.Sessions, false}, {names.CheckpointsBucket(), cfg.Checkpoints, false},
		{names.MailboxBucket(), cfg.Mailbox, true}, {names.RunsBucket(), cfg.RunIndex, false},
	} {
		sc := bucketStreamConfig(b.name, b.cfg, cfg)
		sc.AllowDirect = b.direct
		streams = append(streams, sc)
	}
	for _, sc := range streams {
		if err := p.stream(ctx, sc); err != nil {
			return p.report, err
		}
	}
	if !cfg.SkipWorkers {
		// Runs are routed by agent: the consumers are the agents' (see
		// ProvisionAgents); the fleet-wide settings apply to each.
		if err := p.reconcileAgentConsumers(ctx, names); err != nil {
			return p.report, err
		}
	}
	return p.report, nil
}

// deadLetterStreamConfig keeps max-deliveries advisories until a worker
// handled them (work queue: each once).
func deadLetterStreamConfig(n Names, c ProvisionConfig) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              n.DeadLetterStream(),
		Description:       "Lovia: max-deliveries advisories of run requests, until a worker fails the run",
		Subjects:          []string{n.MaxDeliveriesAdvisory()},
		Retention:         jetstream.WorkQueuePolicy,
		Storage:           c.Storage,
		Replicas:          c.Replicas,
		Discard:           jetstream.DiscardOld,
		MaxAge:            30 * 24 * time.Hour,
		MaxBytes:          -1,
		MaxMsgs:           -1,
		MaxMsgsPerSubject: -1,
		MaxMsgSize:        -1,
		Duplicates:        2 * time.Minute,
	}
}

func runsStreamConfig(n Names, c ProvisionConfig) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              n.RunsStream(),
		Description:       "Lovia run requests (work queue)",
		Subjects:          []string{n.SubmitWildcard()},
		Retention:         jetstream.WorkQueuePolicy,
		Storage:           c.Storage,
		Replicas:          c.Replicas,
		Discard:           jetstream.DiscardNew,
		MaxAge:            c.Runs.MaxAge,
		MaxBytes:          c.Runs.MaxBytes,
		MaxMsgs:           -1,
		MaxMsgsPerSubject: -1,
		MaxMsgSize:        c.Runs.MaxMsgSize,
		Duplicates:        c.Runs.Duplicates,
		AllowDirect:       true,
	}
}

func eventsStreamConfig(n Names, c ProvisionConfig) jetstream.StreamConfig {
	compression := jetstream.S2Compression
	if c.Events.NoCompression {
		compression = jetstream.NoCompression
	}
	return jetstream.StreamConfig{
		Name:              n.EventsStream(),
		Description:       "Lovia run events, one subject per run",
		Subjects:          []string{n.EventsWildcard()},
		Retention:         jetstream.LimitsPolicy,
		Storage:           c.Storage,
		Replicas:          c.Replicas,
		Discard:           jetstream.DiscardOld,
		MaxAge:            c.Events.MaxAge,
		MaxBytes:          c.Events.MaxBytes,
		MaxMsgs:           -1,
		MaxMsgsPerSubject: c.Events.MaxMsgsPerSubject,
		MaxMsgSize:        c.Events.MaxMsgSize,
		Duplicates:        c.Events.Duplicates,
		MaxConsumers:      c.Events.MaxConsumers,
		AllowDirect:       true,
		Compression:       compression,
	}
}

// bucketStreamConfig is the stream nats.go builds for a KV bucket
// (jetstream/kv.go, prepareKeyValueConfig), plus AllowAtomicPublish and an
// explicit MaxConsumers.
func bucketStreamConfig(bucket string, b BucketConfig, c ProvisionConfig) jetstream.StreamConfig {
	dup := 2 * time.Minute
	if b.TTL > 0 && b.TTL < dup {
		dup = b.TTL
	}
	return jetstream.StreamConfig{
		Name:                   KVStream(bucket),
		Description:            "Lovia KV bucket " + bucket,
		Subjects:               []string{KVWildcard(bucket)},
		Retention:              jetstream.LimitsPolicy,
		Storage:                c.Storage,
		Replicas:               c.Replicas,
		Discard:                jetstream.DiscardNew,
		MaxAge:                 b.TTL,
		MaxBytes:               b.MaxBytes,
		MaxMsgs:                -1,
		MaxMsgsPerSubject:      int64(b.History),
		MaxMsgSize:             b.MaxValueSize,
		Duplicates:             dup,
		MaxConsumers:           b.MaxConsumers,
		AllowDirect:            true,
		AllowRollup:            true,
		DenyDelete:             true,
		AllowMsgTTL:            b.LimitMarkerTTL > 0,
		SubjectDeleteMarkerTTL: b.LimitMarkerTTL,
		AllowAtomicPublish:     true,
	}
}

func workersConsumerConfig(n Names, c ProvisionConfig) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       n.WorkersConsumer(),
		Description:   "Lovia workers: claim run requests",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       orDuration(c.Workers.AckWait, DefaultWorkersAckWait),
		MaxDeliver:    c.Workers.MaxDeliver,
		FilterSubject: n.SubmitWildcard(),
		ReplayPolicy:  jetstream.ReplayInstantPolicy,
		MaxWaiting:    c.Workers.MaxWaiting,
		MaxAckPending: orInt(c.Workers.MaxAckPending, DefaultWorkersAckPending),
	}
}

type provisioner struct {
	js     jetstream.JetStream
	cfg    ProvisionConfig
	report *ProvisionReport
}

// stream makes the stream match want. It tries again when another process
// created the stream between our read and our create, and on the transient
// errors of a cluster that is still forming (see retry).
func (p *provisioner) stream(ctx context.Context, want jetstream.StreamConfig) error {
	return p.retry(ctx, func() (bool, error) { return p.streamOnce(ctx, want) })
}

// retry calls once until it reports done or fails with a lasting error.
// Transient errors (see provisionTransient: a cluster still forming, a
// leader election, a call that timed out) are tried again with jittered
// backoff until ctx ends, each logged with the attempt, the error and the
// next wait; the error returned then matches ErrUnavailable. A stream that
// keeps changing under us (not done, no error) is tried for at most
// Timeout.
func (p *provisioner) retry(ctx context.Context, once func() (done bool, err error)) error {
	changing := time.Now().Add(p.cfg.Timeout)
	var bo backoff
	for attempt := 1; ; attempt++ {
		done, err := once()
		if done {
			return nil
		}
		if err != nil && (!provisionTransient(err) || ctx.Err() != nil) {
			return outage(err)
		}
		if off := JetStreamDisabled(ctx, p.js, err); off != nil {
			return off
		}
		wait := bo.wait()
		if err == nil && !time.Now().Add(wait).Before(changing) {
			return errors.New("bus: provision: the stream keeps changing under us")
		}
		if err != nil {
			p.cfg.Logger.Warn("bus: provision: waiting for the cluster", "attempt", attempt, "err", err, "next_wait", wait)
		}
		select {
		case <-ctx.Done():
			if err == nil {
				return ctx.Err()
			}
			return outage(err)
		case <-time.After(wait):
		}
	}
}

// outage marks a transient error with ErrUnavailable (keeping it in the
// chain); other errors pass unchanged.
func outage(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) || !provisionTransient(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// provisionTransient reports the errors a forming or electing cluster
// returns for a moment: IsTransient's, plus no suitable peers yet (10005)
// and insufficient resources (10023), which a cluster whose nodes are
// still joining answers to a replicated create.
func provisionTransient(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == 10005 || apiErr.ErrorCode == 10023) {
		return true
	}
	return IsTransient(err)
}

func (p *provisioner) streamOnce(ctx context.Context, want jetstream.StreamConfig) (done bool, err error) {
	cctx, cancel := withDefaultTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	s, err := p.js.Stream(cctx, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		cctx, cancel := withDefaultTimeout(ctx, p.cfg.Timeout)
		defer cancel()
		_, err := p.js.CreateStream(cctx, want)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("bus: provision: create stream %s: %w", want.Name, err)
		}
		p.report.Created = append(p.report.Created, want.Name)
		p.cfg.Logger.Info("bus: stream created", "stream", want.Name)
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("bus: provision: look up stream %s: %w", want.Name, err)
	}
	have := s.CachedInfo().Config
	merged, changed, incompatible := reconcileStream(have, want)
	if len(incompatible) > 0 {
		return false, &IncompatibleError{Stream: want.Name, Diffs: incompatible}
	}
	if len(changed) == 0 {
		p.report.Unchanged = append(p.report.Unchanged, want.Name)
		return true, nil
	}
	uctx, ucancel := withDefaultTimeout(ctx, p.cfg.Timeout)
	defer ucancel()
	if _, err := p.js.UpdateStream(uctx, merged); err != nil {
		return false, fmt.Errorf("bus: provision: update stream %s (%v): %w", want.Name, changed, err)
	}
	p.report.Updated = append(p.report.Updated, want.Name)
	p.cfg.Logger.Info("bus: stream updated", "stream", want.Name, "changed", changed)
	return true, nil
}

// reconcileStream copies the fields Provision owns from want into have.
// It returns the result, the owned fields that differ, and the differences
// the server cannot apply in place.
func reconcileStream(have, want jetstream.StreamConfig) (jetstream.StreamConfig, []string, []string) {
	var changed, incompatible []string
	if have.Retention != want.Retention {
		incompatible = append(incompatible, fmt.Sprintf("retention: have %s, want %s", have.Retention, want.Retention))
	}
	if have.Storage != want.Storage {
		incompatible = append(incompatible, fmt.Sprintf("storage: have %s, want %s", have.Storage, want.Storage))
	}
	if have.Mirror != nil {
		incompatible = append(incompatible, "the stream is a mirror of "+have.Mirror.Name)
	}
	if have.Sealed {
		incompatible = append(incompatible, "the stream is sealed")
	}
	if len(incompatible) > 0 {
		return have, nil, incompatible
	}
	out := have
	if !sameSet(have.Subjects, want.Subjects) {
		changed = append(changed, fmt.Sprintf("subjects: %v → %v", have.Subjects, want.Subjects))
		out.Subjects = want.Subjects
	}
	setField(&changed, "description", &out.Description, want.Description)
	if want.Replicas != 0 {
		setField(&changed, "replicas", &out.Replicas, want.Replicas)
	}
	setField(&changed, "discard", &out.Discard, want.Discard)
	setField(&changed, "max_age", &out.MaxAge, want.MaxAge)
	setField(&changed, "max_bytes", &out.MaxBytes, want.MaxBytes)
	setField(&changed, "max_msgs", &out.MaxMsgs, want.MaxMsgs)
	setField(&changed, "max_msgs_per_subject", &out.MaxMsgsPerSubject, want.MaxMsgsPerSubject)
	setField(&changed, "max_msg_size", &out.MaxMsgSize, want.MaxMsgSize)
	setField(&changed, "duplicate_window", &out.Duplicates, want.Duplicates)
	setField(&changed, "allow_direct", &out.AllowDirect, want.AllowDirect)
	setField(&changed, "compression", &out.Compression, want.Compression)
	setField(&changed, "allow_rollup_hdrs", &out.AllowRollup, want.AllowRollup)
	if want.MaxConsumers != 0 {
		setField(&changed, "max_consumers", &out.MaxConsumers, want.MaxConsumers)
	}
	if want.DenyDelete {
		setField(&changed, "deny_delete", &out.DenyDelete, want.DenyDelete)
	}
	if want.AllowMsgTTL {
		setField(&changed, "allow_msg_ttl", &out.AllowMsgTTL, want.AllowMsgTTL)
	}
	if want.AllowMsgTTL || have.SubjectDeleteMarkerTTL != 0 {
		setField(&changed, "subject_delete_marker_ttl", &out.SubjectDeleteMarkerTTL, want.SubjectDeleteMarkerTTL)
	}
	if want.AllowMsgSchedules {
		setField(&changed, "allow_msg_schedules", &out.AllowMsgSchedules, want.AllowMsgSchedules)
	}
	if want.AllowAtomicPublish {
		setField(&changed, "allow_atomic", &out.AllowAtomicPublish, want.AllowAtomicPublish)
	}
	return out, changed, nil
}

// setField sets *dst to src, recording name when they differ.
func setField[T comparable](changed *[]string, name string, dst *T, src T) {
	if *dst != src {
		*changed = append(*changed, fmt.Sprintf("%s: %v → %v", name, *dst, src))
		*dst = src
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// consumer makes the durable consumer match want.
func (p *provisioner) consumer(ctx context.Context, stream string, want jetstream.ConsumerConfig) error {
	label := stream + "/" + want.Durable
	cctx, cancel := withDefaultTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	c, err := p.js.Consumer(cctx, stream, want.Durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		if _, err := p.js.CreateOrUpdateConsumer(cctx, stream, want); err != nil {
			return fmt.Errorf("bus: provision: create consumer %s: %w", label, err)
		}
		p.report.Created = append(p.report.Created, label)
		p.cfg.Logger.Info("bus: consumer created", "consumer", label)
		return nil
	}
	if err != nil {
		return fmt.Errorf("bus: provision: look up consumer %s: %w", label, err)
	}
	have := c.CachedInfo().Config
	var incompatible, changed []string
	if have.AckPolicy != want.AckPolicy {
		incompatible = append(incompatible, fmt.Sprintf("ack policy: have %s, want %s", have.AckPolicy, want.AckPolicy))
	}
	if have.DeliverPolicy != want.DeliverPolicy {
		incompatible = append(incompatible, fmt.Sprintf("deliver policy: have %s, want %s", have.DeliverPolicy, want.DeliverPolicy))
	}
	if have.ReplayPolicy != want.ReplayPolicy {
		incompatible = append(incompatible, fmt.Sprintf("replay policy: have %s, want %s", have.ReplayPolicy, want.ReplayPolicy))
	}
	if have.DeliverSubject != "" {
		incompatible = append(incompatible, "the consumer is a push consumer")
	}
	if have.MaxWaiting != want.MaxWaiting {
		incompatible = append(incompatible, fmt.Sprintf("max waiting: have %d, want %d", have.MaxWaiting, want.MaxWaiting))
	}
	if len(incompatible) > 0 {
		return &IncompatibleError{Stream: label, Diffs: incompatible}
	}
	out := have
	if p.cfg.Workers.AckWait != 0 && have.AckWait != want.AckWait {
		changed, out.AckWait = append(changed, "ack_wait"), want.AckWait
	}
	if have.MaxDeliver != want.MaxDeliver {
		changed, out.MaxDeliver = append(changed, "max_deliver"), want.MaxDeliver
	}
	if p.cfg.Workers.MaxAckPending != 0 && have.MaxAckPending != want.MaxAckPending {
		changed, out.MaxAckPending = append(changed, "max_ack_pending"), want.MaxAckPending
	}
	if have.FilterSubject != want.FilterSubject || len(have.FilterSubjects) > 0 {
		changed, out.FilterSubject, out.FilterSubjects = append(changed, "filter_subject"), want.FilterSubject, nil
	}
	if have.Description != want.Description {
		changed, out.Description = append(changed, "description"), want.Description
	}
	if len(changed) == 0 {
		p.report.Unchanged = append(p.report.Unchanged, label)
		return nil
	}
	if _, err := p.js.UpdateConsumer(cctx, stream, out); err != nil {
		return fmt.Errorf("bus: provision: update consumer %s (%v): %w", label, changed, err)
	}
	p.report.Updated = append(p.report.Updated, label)
	p.cfg.Logger.Info("bus: consumer updated", "consumer", label, "changed", changed)
	return nil
}
