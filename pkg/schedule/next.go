package schedule

import "time"

// NextFire is when the schedule fires next after now, as the server
// computes it, given since, when the schedule was added or last resumed
// (an @every counts its intervals from then); zero when it will not fire
// again (paused, an @at that has fired) or the expression does not parse.
func (s *Schedule) NextFire(since, now time.Time) time.Time {
	switch {
	case s.Paused:
		return time.Time{}
	case !s.At.IsZero():
		if s.At.After(now) {
			return s.At.UTC()
		}
		return time.Time{}
	case s.Every != 0:
		every := time.Duration(s.Every)
		next := since.Round(time.Second).Add(every)
		if next.Before(now) {
			next = next.Add((now.Sub(next)/every + 1) * every)
		}
		return next.UTC()
	}
	c, err := s.cron()
	if err != nil {
		return time.Time{}
	}
	next, ok := c.next(now)
	if !ok {
		return time.Time{}
	}
	return next.UTC()
}
