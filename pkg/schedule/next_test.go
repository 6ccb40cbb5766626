package schedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// NextFire is the server's next fire: a cron's next match in its zone,
// an @every counted from the add, an @at until it fires; none when
// paused.
func TestNextFire(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 9, 45, 10, 0, time.UTC) // a Thursday
	since := now.Add(-100 * time.Second)
	for _, c := range []struct {
		name string
		s    Schedule
		want time.Time
	}{
		{"weekday cron", Schedule{Cron: "0 30 9 * * 1-5"}, time.Date(2026, 12, 4, 9, 30, 0, 0, time.UTC)},
		{"cron in a zone", Schedule{Cron: "0 30 9 * * *", TimeZone: "Europe/Paris"}, time.Date(2026, 12, 4, 8, 30, 0, 0, time.UTC)},
		{"@hourly", Schedule{Cron: "@hourly"}, time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)},
		{"@weekly", Schedule{Cron: "@weekly"}, time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)},
		{"every, from its add", Schedule{Every: Duration(30 * time.Second)}, since.Add(120 * time.Second)},
		{"at, ahead", Schedule{At: now.Add(time.Hour)}, now.Add(time.Hour)},
		{"at, fired", Schedule{At: now.Add(-time.Hour)}, time.Time{}},
		{"paused", Schedule{Cron: "@hourly", Paused: true}, time.Time{}},
		{"bad cron", Schedule{Cron: "0 61 * * * *"}, time.Time{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.True(t, c.want.Equal(c.s.NextFire(since, now)), "want %v, got %v", c.want, c.s.NextFire(since, now))
		})
	}
}
