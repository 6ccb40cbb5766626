package schedule

import "time"

// predefinedCron is the six-field expression of each @-name the server
// takes.
var predefinedCron = map[string]string{
	"@yearly": "0 0 0 1 1 *", "@annually": "0 0 0 1 1 *", "@monthly": "0 0 0 1 * *",
	"@weekly": "0 0 0 * * 0", "@daily": "0 0 0 * * *", "@midnight": "0 0 0 * * *", "@hourly": "0 0 * * * *",
}

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
	expr := s.Cron
	if p, ok := predefinedCron[expr]; ok {
		expr = p
	}
	loc := time.UTC
	if s.TimeZone != "" {
		l, err := time.LoadLocation(s.TimeZone)
		if err != nil {
			return time.Time{}
		}
		loc = l
	}
	next, err := cronNext(expr, loc, now.UnixNano())
	if err != nil {
		return time.Time{}
	}
	return next.UTC()
}
