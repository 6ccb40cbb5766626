package bus_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

func allAssets(n bus.Names) []string {
	out := []string{n.RunsStream(), n.SchedulesStream(), n.EventsStream(), n.DeadLetterStream()}
	for _, b := range n.Buckets() {
		out = append(out, bus.KVStream(b))
	}
	return out
}

// provisionAgents provisions the consumers of agents, as a worker does.
func provisionAgents(t *testing.T, b *testBundle, cfg bus.ProvisionConfig, agents ...string) {
	t.Helper()
	require.NoError(t, bus.ProvisionAgents(ctxT(t), b.js, cfg, agents, false))
}

func TestProvision(t *testing.T) {
	t.Parallel()

	t.Run("creates everything, then changes nothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := ctxT(t)
		rep, err := bus.Provision(ctx, b.js, bus.ProvisionConfig{})
		require.NoError(t, err)
		require.ElementsMatch(t, allAssets(b.names), rep.Created)
		require.Empty(t, rep.Updated)

		rep, err = bus.Provision(ctx, b.js, bus.ProvisionConfig{})
		require.NoError(t, err)
		require.Empty(t, rep.Created)
		require.Empty(t, rep.Updated, "a second run must not update anything")
		require.ElementsMatch(t, allAssets(b.names), rep.Unchanged)

		runs, err := b.js.Stream(ctx, "LOVIA_RUNS")
		require.NoError(t, err)
		rc := runs.CachedInfo().Config
		require.Equal(t, jetstream.WorkQueuePolicy, rc.Retention)
		require.Equal(t, []string{"lovia.submit.*"}, rc.Subjects)
		require.Equal(t, 10*time.Minute, rc.Duplicates)
		require.Equal(t, jetstream.FileStorage, rc.Storage)

		events, err := b.js.Stream(ctx, "LOVIA_EVENTS")
		require.NoError(t, err)
		ec := events.CachedInfo().Config
		require.Equal(t, jetstream.LimitsPolicy, ec.Retention)
		require.Equal(t, 72*time.Hour, ec.MaxAge)
		require.Equal(t, int64(100_000), ec.MaxMsgsPerSubject)
		require.True(t, ec.AllowDirect)
		require.Equal(t, 10_000, ec.MaxConsumers)
		require.Equal(t, jetstream.DiscardOld, ec.Discard)

		for _, name := range b.names.Buckets() {
			kv, err := b.js.KeyValue(ctx, name)
			require.NoError(t, err, "bucket %s binds", name)
			_, err = kv.Put(ctx, "k.1", []byte("v"))
			require.NoError(t, err)
			e, err := kv.Get(ctx, "k.1")
			require.NoError(t, err)
			require.Equal(t, "v", string(e.Value()))
			s, err := b.js.Stream(ctx, bus.KVStream(name))
			require.NoError(t, err)
			require.True(t, s.CachedInfo().Config.AllowAtomicPublish, "bucket %s allows atomic batches", name)
			// A resuming run must read the latest checkpoint head and every
			// session segment, and claims, parks and wakes the latest run
			// record and decisions: those reads go to the leader, not to
			// any replica by direct get.
			leaderReads := name != b.names.MailboxBucket()
			require.Equal(t, !leaderReads, s.CachedInfo().Config.AllowDirect, "bucket %s direct gets", name)
		}
		provisionAgents(t, b, bus.ProvisionConfig{}, "a")
		cons, err := b.js.Consumer(ctx, "LOVIA_RUNS", "agent-a")
		require.NoError(t, err)
		require.Equal(t, jetstream.AckExplicitPolicy, cons.CachedInfo().Config.AckPolicy)
		require.Equal(t, 30*time.Second, cons.CachedInfo().Config.AckWait)
		require.Equal(t, "lovia.submit.a", cons.CachedInfo().Config.FilterSubject, "a worker claims only runs of the agents it serves")
	})

	t.Run("updates what the server can change", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := ctxT(t)
		_, err := bus.Provision(ctx, b.js, bus.ProvisionConfig{})
		require.NoError(t, err)
		provisionAgents(t, b, bus.ProvisionConfig{}, "a")
		rep, err := bus.Provision(ctx, b.js, bus.ProvisionConfig{
			Events:      bus.EventsStreamConfig{MaxAge: time.Hour},
			Checkpoints: bus.BucketConfig{History: 5},
			Workers:     bus.WorkersConsumerConfig{AckWait: 10 * time.Second},
		})
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"LOVIA_EVENTS", "KV_lovia_checkpoints", "LOVIA_RUNS/agent-a"}, rep.Updated)
		s, err := b.js.Stream(ctx, "LOVIA_EVENTS")
		require.NoError(t, err)
		require.Equal(t, time.Hour, s.CachedInfo().Config.MaxAge)
		kv, err := b.js.KeyValue(ctx, "lovia_checkpoints")
		require.NoError(t, err)
		st, err := kv.Status(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(5), st.History())
	})

	t.Run("an earlier release's run index bucket gets per-message TTLs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := ctxT(t)
		// The run index bucket as earlier releases provisioned it: no
		// per-message TTLs, no markers, holding a record.
		_, err := bus.Provision(ctx, b.js, bus.ProvisionConfig{RunIndex: bus.BucketConfig{LimitMarkerTTL: time.Hour}})
		require.NoError(t, err)
		s, err := b.js.Stream(ctx, "KV_lovia_runs")
		require.NoError(t, err)
		old := s.CachedInfo().Config
		old.AllowMsgTTL, old.SubjectDeleteMarkerTTL = false, 0
		err = b.js.DeleteStream(ctx, "KV_lovia_runs")
		require.NoError(t, err)
		_, err = b.js.CreateStream(ctx, old)
		require.NoError(t, err)
		kv, err := b.js.KeyValue(ctx, "lovia_runs")
		require.NoError(t, err)
		_, err = kv.Put(ctx, "r1.rec", []byte("kept"))
		require.NoError(t, err)

		rep, err := bus.Provision(ctx, b.js, bus.ProvisionConfig{})
		require.NoError(t, err)
		require.Contains(t, rep.Updated, "KV_lovia_runs", "turning TTLs on is an update the server allows")
		s, err = b.js.Stream(ctx, "KV_lovia_runs")
		require.NoError(t, err)
		require.True(t, s.CachedInfo().Config.AllowMsgTTL)
		require.Equal(t, bus.DefaultRunMarkerTTL, s.CachedInfo().Config.SubjectDeleteMarkerTTL)
		e, err := kv.Get(ctx, "r1.rec")
		require.NoError(t, err, "the update keeps the records")
		require.Equal(t, "kept", string(e.Value()))
	})

	t.Run("unset fleet-wide settings keep the fleet's", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := ctxT(t)
		_, err := bus.Provision(ctx, b.js, bus.ProvisionConfig{})
		require.NoError(t, err)
		provisionAgents(t, b, bus.ProvisionConfig{}, "a")
		cons, err := b.js.Consumer(ctx, "LOVIA_RUNS", "agent-a")
		require.NoError(t, err)
		require.Equal(t, bus.DefaultWorkersAckPending, cons.CachedInfo().Config.MaxAckPending, "created with the default")

		_, err = bus.Provision(ctx, b.js, bus.ProvisionConfig{Workers: bus.WorkersConsumerConfig{AckWait: 2 * time.Minute, MaxAckPending: 50000}})
		require.NoError(t, err)
		rep, err := bus.Provision(ctx, b.js, bus.ProvisionConfig{})
		require.NoError(t, err)
		require.Empty(t, rep.Updated)
		cons, err = b.js.Consumer(ctx, "LOVIA_RUNS", "agent-a")
		require.NoError(t, err)
		require.Equal(t, 2*time.Minute, cons.CachedInfo().Config.AckWait)
		require.Equal(t, 50000, cons.CachedInfo().Config.MaxAckPending)
		// A new agent's consumer takes what the fleet has.
		provisionAgents(t, b, bus.ProvisionConfig{}, "b")
		cons, err = b.js.Consumer(ctx, "LOVIA_RUNS", "agent-b")
		require.NoError(t, err)
		require.Equal(t, 2*time.Minute, cons.CachedInfo().Config.AckWait)
		require.Equal(t, 50000, cons.CachedInfo().Config.MaxAckPending)
	})

	t.Run("deletes the workers consumer of an earlier release", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := ctxT(t)
		_, err := bus.Provision(ctx, b.js, bus.ProvisionConfig{})
		require.NoError(t, err)
		_, err = b.js.CreateOrUpdateConsumer(ctx, "LOVIA_RUNS", jetstream.ConsumerConfig{Durable: "workers", AckPolicy: jetstream.AckExplicitPolicy})
		require.NoError(t, err)
		provisionAgents(t, b, bus.ProvisionConfig{}, "a")
		_, err = b.js.Consumer(ctx, "LOVIA_RUNS", "workers")
		require.ErrorIs(t, err, jetstream.ErrConsumerNotFound)
		_, err = b.js.Consumer(ctx, "LOVIA_RUNS", "agent-a")
		require.NoError(t, err)
	})

	t.Run("keeps settings it does not own", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := ctxT(t)
		_, err := bus.Provision(ctx, b.js, bus.ProvisionConfig{})
		require.NoError(t, err)
		s, err := b.js.Stream(ctx, "LOVIA_EVENTS")
		require.NoError(t, err)
		cfg := s.CachedInfo().Config
		cfg.Metadata = map[string]string{"owner": "ops"}
		cfg.DenyPurge = true
		_, err = b.js.UpdateStream(ctx, cfg)
		require.NoError(t, err)
		rep, err := bus.Provision(ctx, b.js, bus.ProvisionConfig{Events: bus.EventsStreamConfig{MaxAge: time.Hour}})
		require.NoError(t, err)
		require.Contains(t, rep.Updated, "LOVIA_EVENTS")
		s, err = b.js.Stream(ctx, "LOVIA_EVENTS")
		require.NoError(t, err)
		require.Equal(t, "ops", s.CachedInfo().Config.Metadata["owner"])
		require.True(t, s.CachedInfo().Config.DenyPurge)
	})

	t.Run("refuses a stream with another retention", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := ctxT(t)
		_, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: "LOVIA_RUNS", Subjects: []string{"lovia.submit.*"}, Retention: jetstream.LimitsPolicy})
		require.NoError(t, err)
		_, err = bus.Provision(ctx, b.js, bus.ProvisionConfig{})
		require.ErrorIs(t, err, bus.ErrIncompatibleStream)
		var ie *bus.IncompatibleError
		require.ErrorAs(t, err, &ie)
		require.Equal(t, "LOVIA_RUNS", ie.Stream)
		require.Contains(t, err.Error(), "retention: have Limits, want WorkQueue")
		require.Contains(t, err.Error(), "hint:")
		s, err := b.js.Stream(ctx, "LOVIA_RUNS")
		require.NoError(t, err)
		require.Equal(t, jetstream.LimitsPolicy, s.CachedInfo().Config.Retention, "left untouched")
	})

	t.Run("refuses a stream with another storage", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := ctxT(t)
		_, err := bus.Provision(ctx, b.js, bus.ProvisionConfig{})
		require.NoError(t, err)
		_, err = bus.Provision(ctx, b.js, bus.ProvisionConfig{Storage: jetstream.MemoryStorage})
		require.ErrorIs(t, err, bus.ErrIncompatibleStream)
		require.Contains(t, err.Error(), "storage: have File, want Memory")
	})

	t.Run("refuses a workers consumer that cannot be updated", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := ctxT(t)
		_, err := bus.Provision(ctx, b.js, bus.ProvisionConfig{})
		require.NoError(t, err)
		provisionAgents(t, b, bus.ProvisionConfig{}, "a")
		_, err = bus.Provision(ctx, b.js, bus.ProvisionConfig{Workers: bus.WorkersConsumerConfig{MaxWaiting: 7}})
		require.ErrorIs(t, err, bus.ErrIncompatibleStream)
		require.Contains(t, err.Error(), "LOVIA_RUNS/agent-a")
		require.Contains(t, err.Error(), "max waiting")
	})

	t.Run("concurrent startups agree", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := ctxT(t)
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() {
				_, errs[i] = bus.Provision(ctx, b.js, bus.ProvisionConfig{})
			})
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
	})

	t.Run("a custom prefix", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rep, err := bus.Provision(ctxT(t), b.js, bus.ProvisionConfig{Prefix: "acme", SkipWorkers: true})
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"ACME_RUNS", "ACME_SCHEDULES", "ACME_EVENTS", "ACME_DLQ", "KV_acme_sessions", "KV_acme_checkpoints", "KV_acme_mailbox", "KV_acme_runs"}, rep.Created)
	})

	t.Run("a server that does not answer", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx, cancel := context.WithTimeout(t.Context(), time.Nanosecond)
		defer cancel()
		<-ctx.Done()
		_, err := bus.Provision(ctx, b.js, bus.ProvisionConfig{})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Contains(t, err.Error(), "LOVIA_RUNS", "the error names the operation")
	})
}

func TestProvisionConfigValidate(t *testing.T) {
	t.Parallel()
	cases := map[string]bus.ProvisionConfig{
		"Prefix":                   {Prefix: "a.b"},
		"Replicas":                 {Replicas: 7},
		"Events.MaxAge":            {Events: bus.EventsStreamConfig{MaxAge: -time.Second}},
		"Events.Duplicates":        {Events: bus.EventsStreamConfig{MaxAge: time.Minute, Duplicates: time.Hour}},
		"Events.MaxMsgsPerSubject": {Events: bus.EventsStreamConfig{MaxMsgsPerSubject: -5}},
		"Runs.MaxBytes":            {Runs: bus.RunsStreamConfig{MaxBytes: -2}},
		"Sessions.History":         {Sessions: bus.BucketConfig{History: 65}},
		"Mailbox.LimitMarkerTTL":   {Mailbox: bus.BucketConfig{LimitMarkerTTL: time.Millisecond}},
		"Workers.AckWait":          {Workers: bus.WorkersConsumerConfig{AckWait: time.Millisecond}},
	}
	for field, cfg := range cases {
		t.Run(field, func(t *testing.T) {
			t.Parallel()
			_, err := bus.Provision(t.Context(), nil, cfg)
			require.ErrorIs(t, err, bus.ErrInvalidConfig)
			require.Contains(t, err.Error(), field+":")
		})
	}
	d := bus.ProvisionConfig{}.WithDefaults()
	require.Equal(t, "lovia", d.Prefix)
	require.Equal(t, 0, d.Replicas, "unset: keep existing replicas, create with 1")
	require.Equal(t, uint8(1), d.Sessions.History)
}
