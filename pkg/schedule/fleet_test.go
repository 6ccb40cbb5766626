package schedule_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/schedule"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

const agentsYAML = `
agents:
  - name: digest
    model: scripted
    script:
      - text: digest done
  - name: other
    model: scripted
    script:
      - text: other done
`

type bundle struct {
	f   *fleettest.Fleet
	m   *schedule.Manager
	ctx context.Context
}

// setup starts a fleet with no worker up and a Manager on it.
func setup(t *testing.T) *bundle {
	t.Helper()
	f := fleettest.Start(t, fleettest.Options{Workers: -1, AgentsYAML: agentsYAML})
	m, err := schedule.New(schedule.Config{JS: f.JS})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return &bundle{f: f, m: m, ctx: ctx}
}

func (b *bundle) startWorker(t *testing.T) {
	t.Helper()
	b.f.StartWorker(worker.Config{Conn: b.f.Connect(), Catalog: b.f.Catalog, ID: "w1", SkipProvision: true})
}

// count is the number of messages stream holds on subject.
func (b *bundle) count(t *testing.T, stream, subject string) uint64 {
	t.Helper()
	s, err := b.f.JS.Stream(b.ctx, stream)
	require.NoError(t, err)
	info, err := s.Info(b.ctx, jetstream.WithSubjectFilter(subject))
	require.NoError(t, err)
	return info.State.Subjects[subject]
}

// waitCount waits until stream holds at least n messages on subject.
func (b *bundle) waitCount(t *testing.T, stream, subject string, n uint64, what string) {
	t.Helper()
	require.Eventually(t, func() bool { return b.count(t, stream, subject) >= n }, 30*time.Second, 50*time.Millisecond,
		"waited for %d messages on %s in %s (%s); have %d", n, subject, stream, what, b.count(t, stream, subject))
}

// stored reads the messages stream holds on subject (in the runs stream:
// the run requests waiting, without consuming them).
func (b *bundle) stored(t *testing.T, stream, subject string) []*jetstream.RawStreamMsg {
	t.Helper()
	s, err := b.f.JS.Stream(b.ctx, stream)
	require.NoError(t, err)
	info, err := s.Info(b.ctx)
	require.NoError(t, err)
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := s.GetMsg(b.ctx, seq)
		if err != nil {
			continue // acknowledged or never there
		}
		if m.Subject == subject {
			out = append(out, m)
		}
	}
	return out
}

func runID(t *testing.T, m *jetstream.RawStreamMsg) string {
	t.Helper()
	id, err := bus.RawSubmitRunID(&bus.RunRequest{}, m.Header, m.Sequence)
	require.NoError(t, err)
	return id
}

// TestEveryFiresWithNoWorker: an @every 1s schedule queues runs while no
// worker is up; they complete, as ordinary runs with the schedule in their
// metadata, once a worker starts.
func TestEveryFiresWithNoWorker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.m.Add(b.ctx, schedule.Schedule{Name: "tick", Agent: "digest", Input: "summarise", Every: schedule.Duration(time.Second)})
	require.NoError(t, err)
	b.waitCount(t, "LOVIA_RUNS", "lovia.submit.digest", 2, "two fires queued with no worker up")
	require.NoError(t, b.m.Remove(b.ctx, "tick"))

	reqs := b.stored(t, "LOVIA_RUNS", "lovia.submit.digest")
	require.GreaterOrEqual(t, len(reqs), 2)
	ids := map[string]bool{}
	for _, r := range reqs {
		id := runID(t, r)
		require.True(t, strings.HasPrefix(id, "sched-tick-"), "fire run id %q names the schedule", id)
		ids[id] = true
	}
	require.Len(t, ids, len(reqs), "each fire is its own run")

	b.startWorker(t)
	for id := range ids {
		envs := b.f.Events(id, 30*time.Second)
		require.Equal(t, string(loop.EventRunCompleted), fleettest.Types(envs)[len(envs)-1], "run %s completed", id)
		e, err := b.f.Store.Runs().Get(b.ctx, id)
		require.NoError(t, err)
		require.Equal(t, "tick", e.Record.Metadata[schedule.MetadataKey], "run %s records its schedule", id)
	}
}

// TestCronInTimeZone: a cron schedule is read in its time zone: one that
// matches every second of the current and next hour in New York fires now,
// and the server's Nats-Schedule-Next on the fire is the next second, in
// that zone's hours and offset.
func TestCronInTimeZone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	h := time.Now().In(ny).Hour()
	hours := map[int]bool{h: true, (h + 1) % 24: true}
	cron := fmt.Sprintf("* * %d,%d * * *", h, (h+1)%24)
	_, err = b.m.Add(b.ctx, schedule.Schedule{Name: "ny", Agent: "digest", Input: "x", Cron: cron, TimeZone: "America/New_York"})
	require.NoError(t, err)
	b.waitCount(t, "LOVIA_RUNS", "lovia.submit.digest", 1, "a fire of the cron schedule")
	require.NoError(t, b.m.Remove(b.ctx, "ny"))

	fire := b.stored(t, "LOVIA_RUNS", "lovia.submit.digest")[0]
	nextHdr := fire.Header.Get(bus.HeaderScheduleNext)
	next, err := time.Parse(time.RFC3339Nano, nextHdr)
	require.NoError(t, err, "Nats-Schedule-Next %q", nextHdr)
	require.True(t, hours[next.In(ny).Hour()], "next fire %s is in hour %d or %d of New York", nextHdr, h, (h+1)%24)
	_, off := next.In(ny).Zone()
	_, hdrOff := next.Zone()
	require.Equal(t, off, hdrOff, "the next fire %s is written in New York's offset", nextHdr)
	require.Zero(t, next.Nanosecond(), "cron fires on whole seconds")
	fired := fire.Time
	require.True(t, next.After(fired.Add(-time.Second)) && next.Before(fired.Add(2*time.Second)),
		"next fire %s is a second after the fire stored at %s", nextHdr, fired)

	// The same hours read in UTC would not match now: the zone decided.
	utcHour := time.Now().UTC().Hour()
	require.False(t, hours[utcHour], "New York is not UTC")
	require.Equal(t, "sched-ny-"+fmt.Sprint(next.Unix()), runID(t, fire), "the run id carries the fire's slot")
}

// TestRemoveStops: a removed schedule fires no more. Another schedule's
// fires show the scheduler ran past the removed one's next fire times.
func TestRemoveStops(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.m.Add(b.ctx, schedule.Schedule{Name: "gone", Agent: "digest", Input: "x", Every: schedule.Duration(time.Second)})
	require.NoError(t, err)
	b.waitCount(t, "LOVIA_SCHEDULES", "lovia.fire.digest", 1, "a fire before the remove")
	require.NoError(t, b.m.Remove(b.ctx, "gone"))
	fired := b.count(t, "LOVIA_SCHEDULES", "lovia.fire.digest")
	_, err = b.m.Get(b.ctx, "gone")
	require.ErrorIs(t, err, schedule.ErrNotFound)
	require.ErrorIs(t, b.m.Remove(b.ctx, "gone"), schedule.ErrNotFound)

	_, err = b.m.Add(b.ctx, schedule.Schedule{Name: "probe", Agent: "other", Input: "x", Every: schedule.Duration(time.Second)})
	require.NoError(t, err)
	b.waitCount(t, "LOVIA_SCHEDULES", "lovia.fire.other", 3, "three fires of the probe schedule (3s of scheduler time)")
	require.Equal(t, fired, b.count(t, "LOVIA_SCHEDULES", "lovia.fire.digest"), "no fire of the removed schedule")
	b.waitCount(t, "LOVIA_RUNS", "lovia.submit.digest", fired, "the runs stream sourced every fire")
	require.Equal(t, fired, b.count(t, "LOVIA_RUNS", "lovia.submit.digest"), "no run of the removed schedule")
}

// TestPauseResume: a paused schedule keeps its definition and does not
// fire; resumed, it fires again.
func TestPauseResume(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.m.Add(b.ctx, schedule.Schedule{Name: "nap", Agent: "digest", Input: "x", Every: schedule.Duration(time.Second)})
	require.NoError(t, err)
	b.waitCount(t, "LOVIA_SCHEDULES", "lovia.fire.digest", 1, "a fire before the pause")
	s, err := b.m.Pause(b.ctx, "nap")
	require.NoError(t, err)
	require.True(t, s.Paused)
	fired := b.count(t, "LOVIA_SCHEDULES", "lovia.fire.digest")

	_, err = b.m.Add(b.ctx, schedule.Schedule{Name: "probe", Agent: "other", Input: "x", Every: schedule.Duration(time.Second)})
	require.NoError(t, err)
	b.waitCount(t, "LOVIA_SCHEDULES", "lovia.fire.other", 3, "three fires of the probe schedule")
	require.Equal(t, fired, b.count(t, "LOVIA_SCHEDULES", "lovia.fire.digest"), "no fire while paused")

	list, err := b.m.List(b.ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, schedule.Schedule{Name: "nap", Agent: "digest", Input: "x", Every: schedule.Duration(time.Second), Paused: true}, list[0])

	_, err = b.m.Resume(b.ctx, "nap")
	require.NoError(t, err)
	b.waitCount(t, "LOVIA_SCHEDULES", "lovia.fire.digest", fired+1, "a fire after the resume")
	got, err := b.m.Get(b.ctx, "nap")
	require.NoError(t, err)
	require.False(t, got.Paused)
}

// TestDuplicateFireIsOneRun: two copies of one fire (here the server's
// fire of an @at schedule and a byte-for-byte copy) are one run: one
// run_started, one run_completed, both requests consumed.
func TestDuplicateFireIsOneRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	at := time.Now().Add(2 * time.Second).Truncate(time.Second)
	_, err := b.m.Add(b.ctx, schedule.Schedule{Name: "once", Agent: "digest", Input: "x", At: at})
	require.NoError(t, err)
	b.waitCount(t, "LOVIA_RUNS", "lovia.submit.digest", 1, "the @at fire")
	fire := b.stored(t, "LOVIA_RUNS", "lovia.submit.digest")[0]
	_, err = b.m.Get(b.ctx, "once")
	require.ErrorIs(t, err, schedule.ErrNotFound, "an @at schedule is gone once it fired")

	dup := nats.NewMsg("lovia.fire.digest")
	dup.Data = fire.Data
	for k, v := range fire.Header {
		if k != "Nats-Stream-Source" {
			dup.Header[k] = v
		}
	}
	_, err = b.f.JS.PublishMsg(b.ctx, dup)
	require.NoError(t, err)
	b.waitCount(t, "LOVIA_RUNS", "lovia.submit.digest", 2, "the copy sourced as a second request")
	reqs := b.stored(t, "LOVIA_RUNS", "lovia.submit.digest")
	want := "sched-once-" + fmt.Sprint(at.Unix())
	require.Equal(t, want, runID(t, reqs[0]))
	require.Equal(t, want, runID(t, reqs[1]))

	b.startWorker(t)
	require.Eventually(t, func() bool { return b.count(t, "LOVIA_RUNS", "lovia.submit.digest") == 0 }, 30*time.Second, 50*time.Millisecond,
		"waited for the worker to consume both requests")
	types := fleettest.Types(b.f.Events(want, 30*time.Second))
	require.Equal(t, uint64(len(types)), b.count(t, "LOVIA_EVENTS", "lovia.events."+want), "no event after the terminal one: %v", types)
	n := 0
	for _, ty := range types {
		if ty == string(loop.EventRunStarted) || ty == string(loop.EventRunCompleted) {
			n++
		}
	}
	require.Equal(t, 2, n, "one run_started and one run_completed: %v", types)
}

// TestResumeAfterAtPassed: an @at schedule paused before its time does not
// fire at its time; resumed after it, it fires once, at once, as the run
// named by its time.
func TestResumeAfterAtPassed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	at := time.Now().Add(3 * time.Second).Truncate(time.Second)
	_, err := b.m.Add(b.ctx, schedule.Schedule{Name: "late", Agent: "digest", Input: "x", At: at})
	require.NoError(t, err)
	_, err = b.m.Pause(b.ctx, "late")
	require.NoError(t, err)

	// A probe schedule added after the @at's time that has fired twice
	// shows the scheduler ran past it.
	require.Eventually(t, func() bool { return time.Now().After(at) }, 30*time.Second, 50*time.Millisecond, "waited for %s to pass", at)
	_, err = b.m.Add(b.ctx, schedule.Schedule{Name: "probe", Agent: "other", Input: "x", Every: schedule.Duration(time.Second)})
	require.NoError(t, err)
	b.waitCount(t, "LOVIA_SCHEDULES", "lovia.fire.other", 2, "two fires of the probe schedule")
	require.Zero(t, b.count(t, "LOVIA_SCHEDULES", "lovia.fire.digest"), "no fire while paused")

	_, err = b.m.Resume(b.ctx, "late")
	require.NoError(t, err)
	b.waitCount(t, "LOVIA_RUNS", "lovia.submit.digest", 1, "the fire after the resume")
	reqs := b.stored(t, "LOVIA_RUNS", "lovia.submit.digest")
	require.Len(t, reqs, 1)
	require.Equal(t, "sched-late-"+fmt.Sprint(at.Unix()), runID(t, reqs[0]))
	_, err = b.m.Get(b.ctx, "late")
	require.ErrorIs(t, err, schedule.ErrNotFound, "an @at schedule is gone once it fired")
}

// TestMissedFiresCoalesce: fires an @every 1s schedule missed while the
// server was down are not made up one by one: once it is back, every fire
// names a next fire after its own time (a catch-up fire would name a slot
// already past), and each is its own run.
func TestMissedFiresCoalesce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.m.Add(b.ctx, schedule.Schedule{Name: "beat", Agent: "digest", Input: "x", Every: schedule.Duration(time.Second)})
	require.NoError(t, err)
	b.waitCount(t, "LOVIA_SCHEDULES", "lovia.fire.digest", 1, "a fire before the outage")
	before := b.count(t, "LOVIA_SCHEDULES", "lovia.fire.digest")
	b.f.RestartServer(4 * time.Second) // about four fires missed
	b.waitCount(t, "LOVIA_SCHEDULES", "lovia.fire.digest", before+2, "two fires after the outage")
	require.NoError(t, b.m.Remove(b.ctx, "beat"))

	s, err := b.f.JS.Stream(b.ctx, "LOVIA_SCHEDULES")
	require.NoError(t, err)
	info, err := s.Info(b.ctx)
	require.NoError(t, err)
	ids := map[string]bool{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(b.ctx, seq)
		if err != nil || m.Subject != "lovia.fire.digest" {
			continue
		}
		next, err := time.Parse(time.RFC3339Nano, m.Header.Get(bus.HeaderScheduleNext))
		require.NoError(t, err)
		require.False(t, next.Before(m.Time.Add(-time.Second)), "fire stored at %s names next fire %s: a made-up missed fire", m.Time, next)
		id := bus.ScheduledRunID(m.Header)
		require.False(t, ids[id], "two fires with run id %s", id)
		ids[id] = true
	}
	require.GreaterOrEqual(t, len(ids), int(before)+2)
}
