package schedule_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/schedule"
)

// TestValidate: every bad definition is refused with the field named and a
// hint, before anything reaches the server.
func TestValidate(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ok := schedule.Schedule{Name: "n", Agent: "a", Input: "x", Every: schedule.Duration(time.Minute)}
	require.NoError(t, ok.Validate(now))
	for name, tc := range map[string]struct {
		edit  func(*schedule.Schedule)
		field string
	}{
		"no name":           {func(s *schedule.Schedule) { s.Name = "" }, "name"},
		"dotted name":       {func(s *schedule.Schedule) { s.Name = "a.b" }, "name"},
		"long name":         {func(s *schedule.Schedule) { s.Name = string(make([]byte, 101)) }, "name"},
		"no agent":          {func(s *schedule.Schedule) { s.Agent = "" }, "agent"},
		"wildcard agent":    {func(s *schedule.Schedule) { s.Agent = "a*" }, "agent"},
		"no input":          {func(s *schedule.Schedule) { s.Input = "  " }, "input"},
		"bad session":       {func(s *schedule.Schedule) { s.SessionID = "s 1" }, "session_id"},
		"no when":           {func(s *schedule.Schedule) { s.Every = 0 }, "when"},
		"two whens":         {func(s *schedule.Schedule) { s.Cron = "@daily" }, "when"},
		"every under 1s":    {func(s *schedule.Schedule) { s.Every = schedule.Duration(500 * time.Millisecond) }, "every"},
		"every fractional":  {func(s *schedule.Schedule) { s.Every = schedule.Duration(1500 * time.Millisecond) }, "every"},
		"at in the past":    {func(s *schedule.Schedule) { s.Every, s.At = 0, now.Add(-time.Second) }, "at"},
		"five-field cron":   {func(s *schedule.Schedule) { s.Every, s.Cron = 0, "30 9 * * *" }, "cron"},
		"cron out of range": {func(s *schedule.Schedule) { s.Every, s.Cron = 0, "0 99 * * * *" }, "cron"},
		"cron never":        {func(s *schedule.Schedule) { s.Every, s.Cron = 0, "0 0 0 31 2 *" }, "cron"},
		"cron bad name":     {func(s *schedule.Schedule) { s.Every, s.Cron = 0, "0 0 9 * * funday" }, "cron"},
		"tz without cron":   {func(s *schedule.Schedule) { s.TimeZone = "Europe/Paris" }, "time_zone"},
		"unknown tz":        {func(s *schedule.Schedule) { s.Every, s.Cron, s.TimeZone = 0, "@daily", "Mars/Olympus" }, "time_zone"},
	} {
		s := ok
		tc.edit(&s)
		err := s.Validate(now)
		require.ErrorIs(t, err, schedule.ErrInvalid, name)
		info := bus.ErrorFor(err)
		require.Equal(t, bus.TypeInvalidRequest, info.Type, name)
		require.Contains(t, info.Message, tc.field, name)
		require.NotEmpty(t, info.Hint, name)
		if tc.field == "name" {
			require.NotContains(t, info.Message, "128", "%s: a schedule name is at most 100 characters", name)
		}
	}
}

// TestServerRefusals: what only the server checks (a cron field out of
// range) comes back as ErrInvalid with a hint; a taken name as ErrExists.
func TestServerRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.m.Add(b.ctx, schedule.Schedule{Name: "bad", Agent: "digest", Input: "x", Cron: "0 99 * * * *"})
	require.ErrorIs(t, err, schedule.ErrInvalid)
	require.NotEmpty(t, bus.ErrorFor(err).Hint)

	s := schedule.Schedule{Name: "twice", Agent: "digest", Input: "x", Cron: "@daily", TimeZone: "Europe/Paris"}
	_, err = b.m.Add(b.ctx, s)
	require.NoError(t, err)
	_, err = b.m.Add(b.ctx, s)
	require.ErrorIs(t, err, schedule.ErrExists)
	require.Contains(t, bus.ErrorFor(err).Hint, "lovia schedule rm twice")
	got, err := b.m.Get(b.ctx, "twice")
	require.NoError(t, err)
	require.False(t, got.Next.IsZero(), "a listed schedule has its next fire")
	got.Next = time.Time{}
	require.Equal(t, s, got)
	_, err = b.m.Pause(b.ctx, "missing")
	require.ErrorIs(t, err, schedule.ErrNotFound)
	require.Equal(t, bus.TypeNotFound, bus.ErrorFor(err).Type)
}
