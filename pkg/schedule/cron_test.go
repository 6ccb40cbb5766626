package schedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCronSlots: next and prev agree with the server's reading of a cron
// expression: seconds first, names, steps, a zone, day-of-month OR
// day-of-week when both are restricted.
func TestCronSlots(t *testing.T) {
	t.Parallel()
	paris, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	at := time.Date(2026, 12, 3, 13, 16, 27, 500_000_000, time.UTC) // a Thursday
	for _, tc := range []struct {
		expr       string
		loc        *time.Location
		prev, next time.Time
	}{
		{"*/10 * * * * *", nil, time.Date(2026, 12, 3, 13, 16, 20, 0, time.UTC), time.Date(2026, 12, 3, 13, 16, 30, 0, time.UTC)},
		{"0 30 9 * * mon-fri", paris, time.Date(2026, 12, 3, 8, 30, 0, 0, time.UTC), time.Date(2026, 12, 4, 8, 30, 0, 0, time.UTC)},
		{"@daily", nil, time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)},
		{"0 0 12 1 * 5", nil, time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)},
		{"@yearly", nil, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		c, err := parseCron(tc.expr, tc.loc)
		require.NoError(t, err, tc.expr)
		next, ok := c.next(at)
		require.True(t, ok, tc.expr)
		require.True(t, tc.next.Equal(next), "%s: next %s, want %s", tc.expr, next, tc.next)
		prev, ok := c.prev(at, 400*24*time.Hour)
		require.True(t, ok, tc.expr)
		require.True(t, tc.prev.Equal(prev), "%s: prev %s, want %s", tc.expr, prev, tc.prev)
	}
	for _, bad := range []string{"0 60 * * * *", "* * * * *", "1-2-3 * * * * *", "*/0 * * * * *", "5-1 * * * * *", "x * * * * *"} {
		_, err := parseCron(bad, nil)
		require.Error(t, err, bad)
	}
}
