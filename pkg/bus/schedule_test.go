package bus_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

func TestScheduledRunID(t *testing.T) {
	t.Parallel()
	next := time.Date(2026, 12, 1, 10, 0, 5, 0, time.UTC)
	fire := nats.Header{bus.HeaderSchedule: {"nightly"}, bus.HeaderScheduler: {"lovia.schedule.nightly"},
		bus.HeaderScheduleNext: {next.Format(time.RFC3339Nano)}}

	t.Run("a repeating fire is named by its next time", func(t *testing.T) {
		require.Equal(t, "sched-nightly-1796119205", bus.ScheduledRunID(fire))
		id, err := bus.RawSubmitRunID(&bus.RunRequest{}, fire, 42)
		require.NoError(t, err)
		require.Equal(t, "sched-nightly-1796119205", id, "the same fire stored twice (other stream seqs) is one run")
		id, err = bus.RawSubmitRunID(&bus.RunRequest{}, fire, 43)
		require.NoError(t, err)
		require.Equal(t, "sched-nightly-1796119205", id)
	})
	t.Run("fires of other slots are other runs", func(t *testing.T) {
		other := nats.Header{bus.HeaderSchedule: {"nightly"}, bus.HeaderScheduleNext: {next.Add(time.Second).Format(time.RFC3339Nano)}}
		require.Equal(t, "sched-nightly-1796119206", bus.ScheduledRunID(other))
	})
	t.Run("an @at fire is named by its time", func(t *testing.T) {
		at := nats.Header{bus.HeaderSchedule: {"once"}, bus.HeaderScheduleNext: {bus.ScheduleNextPurge},
			bus.HeaderScheduleAt: {"2026-12-01T10:00:05Z"}}
		require.Equal(t, "sched-once-1796119205", bus.ScheduledRunID(at))
	})
	t.Run("a body run id or message id still wins", func(t *testing.T) {
		id, err := bus.RawSubmitRunID(&bus.RunRequest{RunID: "mine"}, fire, 1)
		require.NoError(t, err)
		require.Equal(t, "mine", id)
	})
	t.Run("no schedule or unparsable headers fall through", func(t *testing.T) {
		for name, h := range map[string]nats.Header{
			"none":           nil,
			"no next":        {bus.HeaderSchedule: {"nightly"}},
			"bad next":       {bus.HeaderSchedule: {"nightly"}, bus.HeaderScheduleNext: {"soon"}},
			"purge, no at":   {bus.HeaderSchedule: {"once"}, bus.HeaderScheduleNext: {bus.ScheduleNextPurge}},
			"dotted name":    {bus.HeaderSchedule: {"a.b"}, bus.HeaderScheduleNext: {next.Format(time.RFC3339)}},
			"name too long":  {bus.HeaderSchedule: {string(make([]byte, 101))}, bus.HeaderScheduleNext: {next.Format(time.RFC3339)}},
			"no name at all": {bus.HeaderScheduleNext: {next.Format(time.RFC3339)}},
		} {
			require.Empty(t, bus.ScheduledRunID(h), name)
			id, err := bus.RawSubmitRunID(&bus.RunRequest{}, h, 7)
			require.NoError(t, err, name)
			require.Equal(t, "run-7", id, name)
		}
	})
}

func TestScheduleNames(t *testing.T) {
	t.Parallel()
	n, err := bus.NewNames("acme")
	require.NoError(t, err)
	subj, err := n.Schedule("nightly")
	require.NoError(t, err)
	require.Equal(t, "acme.schedule.nightly", subj)
	require.Equal(t, "acme.schedule.*", n.ScheduleWildcard())
	name, err := n.ParseSchedule(subj)
	require.NoError(t, err)
	require.Equal(t, "nightly", name)
	_, err = n.Schedule("a.b")
	require.ErrorIs(t, err, bus.ErrInvalidToken)
	_, err = n.ParseSchedule("acme.submit.x")
	require.Error(t, err)
}

// TestScheduleSource: Provision creates the schedules stream and leaves a
// runs stream of an earlier release alone (no source consumer until a
// schedule exists); EnsureScheduleSource adds the source in place, keeping
// the waiting requests, and a second call and Provision keep it.
func TestScheduleSource(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	_, err := b.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "LOVIA_RUNS", Subjects: []string{"lovia.submit.*"}, Retention: jetstream.WorkQueuePolicy,
		Storage: jetstream.FileStorage, Discard: jetstream.DiscardNew, MaxAge: 24 * time.Hour,
		Duplicates: 10 * time.Minute, AllowDirect: true,
	})
	require.NoError(t, err)
	_, err = b.js.Publish(ctx, "lovia.submit.demo", []byte(`{"input":"hi"}`))
	require.NoError(t, err)

	_, err = bus.Provision(ctx, b.js, bus.ProvisionConfig{})
	require.NoError(t, err)
	sched, err := b.js.Stream(ctx, "LOVIA_SCHEDULES")
	require.NoError(t, err)
	sc := sched.CachedInfo().Config
	require.True(t, sc.AllowMsgSchedules, "message schedules enabled")
	require.True(t, sc.AllowMsgTTL, "schedule messages outlive MaxAge with Nats-TTL: never")
	require.ElementsMatch(t, []string{"lovia.schedule.*", "lovia.fire.*"}, sc.Subjects)
	s, err := b.js.Stream(ctx, "LOVIA_RUNS")
	require.NoError(t, err)
	require.Empty(t, s.CachedInfo().Config.Sources, "no source before a schedule exists")

	names, _ := bus.NewNames("")
	for range 2 {
		require.NoError(t, bus.EnsureScheduleSource(ctx, b.js, names))
		s, err = b.js.Stream(ctx, "LOVIA_RUNS")
		require.NoError(t, err)
		cfg := s.CachedInfo().Config
		require.Len(t, cfg.Sources, 1, "the runs stream sources the schedules' fires")
		require.Equal(t, "LOVIA_SCHEDULES", cfg.Sources[0].Name)
		require.Equal(t, []string{"lovia.submit.*"}, cfg.Subjects)
		require.Equal(t, uint64(1), s.CachedInfo().State.Msgs, "the waiting request is kept")
	}
	rep, err := bus.Provision(ctx, b.js, bus.ProvisionConfig{})
	require.NoError(t, err)
	require.Contains(t, rep.Unchanged, "LOVIA_RUNS")
	s, err = b.js.Stream(ctx, "LOVIA_RUNS")
	require.NoError(t, err)
	require.Len(t, s.CachedInfo().Config.Sources, 1, "Provision keeps the source")

	// A fire is copied as a run request of its agent.
	_, err = b.js.Publish(ctx, "lovia.fire.demo", []byte(`{"input":"fired"}`))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		m, err := s.GetLastMsgForSubject(ctx, "lovia.submit.demo")
		return err == nil && string(m.Data) == `{"input":"fired"}`
	}, 10*time.Second, 20*time.Millisecond, "waited for the fire on lovia.submit.demo")
}
