package schedule_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/schedule"
)

// keeper starts a schedule Keeper on a connection of its own, as another
// process of the fleet would run one.
func (b *bundle) keeper(t *testing.T) {
	t.Helper()
	js, err := jetstream.New(b.f.Connect())
	require.NoError(t, err)
	m, err := schedule.New(schedule.Config{JS: js})
	require.NoError(t, err)
	k, err := schedule.NewKeeper(schedule.KeeperConfig{Manager: m, Grace: 2 * time.Second, Poll: 50 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, k.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, k.Stop(context.Background())) })
}

// TestMissedCronFireAfterCrash: the server crashes (its store as a kill -9
// leaves it: no schedule state written since the schedule was added) just
// after a fire of a cron schedule every 10s and comes back after the next
// slot. The server skips that slot; two Keepers (two processes) fire it
// once, as the run the missed fire would have been, and the server's own
// fires go on.
func TestMissedCronFireAfterCrash(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.keeper(t)
	b.keeper(t)
	_, err := b.m.Add(b.ctx, schedule.Schedule{Name: "tenner", Agent: "digest", Input: "x", Cron: "*/10 * * * * *"})
	require.NoError(t, err)
	b.waitCount(t, "LOVIA_SCHEDULES", "lovia.fire.digest", 1, "the first fire")
	first := b.stored(t, "LOVIA_SCHEDULES", "lovia.fire.digest")[0]
	slot := first.Time.Truncate(10 * time.Second)
	missed := slot.Add(10 * time.Second)
	if time.Until(missed) < 3*time.Second {
		t.Skipf("the first fire (%s) was stored too late to crash before the next slot", first.Time)
	}
	b.f.CrashServer(time.Until(missed) + 500*time.Millisecond)

	// The catch-up fire, then the server's fire of the slot after.
	b.waitCount(t, "LOVIA_SCHEDULES", "lovia.fire.digest", 3, "the catch-up fire and the server's next fire")
	fires := b.stored(t, "LOVIA_SCHEDULES", "lovia.fire.digest")
	var catchUps []string
	ids := map[string]int{}
	for _, m := range fires {
		ids[runID(t, m)]++
		if m.Header.Get(schedule.HeaderMissed) != "" {
			catchUps = append(catchUps, runID(t, m))
			require.Equal(t, missed.UTC().Format(time.RFC3339), m.Header.Get(schedule.HeaderMissed), "the catch-up names the missed slot")
		}
	}
	want := "sched-tenner-" + fmt.Sprint(missed.Add(10*time.Second).Unix())
	require.Equal(t, []string{want}, catchUps, "one catch-up fire, named as the missed fire would have been; fires %v", ids)
	for id, n := range ids {
		require.Equal(t, 1, n, "run %s fired once", id)
	}
	require.NoError(t, b.m.Remove(b.ctx, "tenner"))

	b.startWorker(t)
	envs := b.f.Events(want, 30*time.Second)
	require.Equal(t, string(loop.EventRunCompleted), fleettest.Types(envs)[len(envs)-1], "the caught-up run completed")
	e, err := b.f.Store.Runs().Get(b.ctx, want)
	require.NoError(t, err)
	require.Equal(t, "tenner", e.Record.Metadata[schedule.MetadataKey])
}

// TestMissedEveryFireAfterCrash: the same for an @every schedule, whose
// slots follow its last fire: after a crash past its next fire, one
// catch-up fire, then the server's cadence from its restart.
func TestMissedEveryFireAfterCrash(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.keeper(t)
	_, err := b.m.Add(b.ctx, schedule.Schedule{Name: "eight", Agent: "digest", Input: "x", Every: schedule.Duration(8 * time.Second)})
	require.NoError(t, err)
	b.waitCount(t, "LOVIA_SCHEDULES", "lovia.fire.digest", 1, "the first fire")
	first := b.stored(t, "LOVIA_SCHEDULES", "lovia.fire.digest")[0]
	next, err := time.Parse(time.RFC3339Nano, first.Header.Get(bus.HeaderScheduleNext))
	require.NoError(t, err)
	if time.Until(next) < 3*time.Second {
		t.Skipf("the first fire (%s) was stored too late to crash before the next (%s)", first.Time, next)
	}
	b.f.CrashServer(time.Until(next) + 500*time.Millisecond)

	b.waitCount(t, "LOVIA_SCHEDULES", "lovia.fire.digest", 2, "the catch-up fire")
	fires := b.stored(t, "LOVIA_SCHEDULES", "lovia.fire.digest")
	require.NotEmpty(t, fires[1].Header.Get(schedule.HeaderMissed), "the fire after the crash is the catch-up: %v", fires[1].Header)
	require.NoError(t, b.m.Remove(b.ctx, "eight"))
	require.Len(t, b.stored(t, "LOVIA_SCHEDULES", "lovia.fire.digest"), 2, "one catch-up")
}
