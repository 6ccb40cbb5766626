package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// cronSpec is a parsed six-field cron expression. Its matching is the
// NATS server's (server/cron.go, after robfig/cron): the slots the catch-up
// computes are the slots the server fires.
type cronSpec struct {
	sec, min, hour, dom, month, dow uint64
	loc                             *time.Location
}

// starBit marks a field written as * or ?: a day-of-month or day-of-week
// star makes the two day fields AND, not OR.
const starBit = 1 << 63

var cronAliases = map[string]string{
	"@yearly": "0 0 0 1 1 *", "@annually": "0 0 0 1 1 *", "@monthly": "0 0 0 1 * *",
	"@weekly": "0 0 0 * * 0", "@daily": "0 0 0 * * *", "@midnight": "0 0 0 * * *", "@hourly": "0 0 * * * *",
}

type cronField struct {
	name     string
	min, max uint
	names    map[string]uint
}

var cronFields = [6]cronField{
	{"seconds", 0, 59, nil},
	{"minutes", 0, 59, nil},
	{"hours", 0, 23, nil},
	{"day of month", 1, 31, nil},
	{"month", 1, 12, map[string]uint{"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12}},
	{"day of week", 0, 6, map[string]uint{"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}},
}

// parseCron parses expr (six fields, seconds first, or an @alias) read in
// loc (nil: UTC).
func parseCron(expr string, loc *time.Location) (*cronSpec, error) {
	if a, ok := cronAliases[expr]; ok {
		expr = a
	}
	fields := strings.Fields(expr)
	if len(fields) != 6 {
		return nil, fmt.Errorf("has %d fields, want 6", len(fields))
	}
	if loc == nil {
		loc = time.UTC
	}
	var bits [6]uint64
	for i, f := range fields {
		for _, part := range strings.Split(f, ",") {
			b, err := cronRange(part, cronFields[i])
			if err != nil {
				return nil, fmt.Errorf("%s field %q: %w", cronFields[i].name, f, err)
			}
			bits[i] |= b
		}
	}
	return &cronSpec{sec: bits[0], min: bits[1], hour: bits[2], dom: bits[3], month: bits[4], dow: bits[5], loc: loc}, nil
}

// cronRange reads * | ? | N | N-M, each optionally /STEP.
func cronRange(expr string, f cronField) (uint64, error) {
	rangePart, stepPart, hasStep := strings.Cut(expr, "/")
	if strings.Contains(stepPart, "/") {
		return 0, errors.New("too many slashes")
	}
	var start, end uint
	var extra uint64
	if rangePart == "*" || rangePart == "?" {
		start, end, extra = f.min, f.max, starBit
	} else {
		lo, hi, isRange := strings.Cut(rangePart, "-")
		var err error
		if start, err = cronNumber(lo, f); err != nil {
			return 0, err
		}
		end = start
		if isRange {
			if strings.Contains(hi, "-") {
				return 0, errors.New("too many hyphens")
			}
			if end, err = cronNumber(hi, f); err != nil {
				return 0, err
			}
		}
		if hasStep && !isRange {
			end = f.max // N/STEP is N-max/STEP
		}
	}
	step := uint(1)
	if hasStep {
		n, err := strconv.Atoi(stepPart)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("step %q is not a positive number", stepPart)
		}
		step = uint(n)
		if step > 1 {
			extra = 0
		}
	}
	switch {
	case start < f.min:
		return 0, fmt.Errorf("%d is below %d", start, f.min)
	case end > f.max:
		return 0, fmt.Errorf("%d is above %d", end, f.max)
	case start > end:
		return 0, fmt.Errorf("the range %d-%d runs backwards", start, end)
	}
	var bits uint64
	for i := start; i <= end; i += step {
		bits |= 1 << i
	}
	return bits | extra, nil
}

func cronNumber(s string, f cronField) (uint, error) {
	if v, ok := f.names[strings.ToLower(s)]; ok {
		return v, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	return uint(n), nil
}

// next returns the first slot after t (to the second), or false when
// there is none within five years.
func (c *cronSpec) next(t time.Time) (time.Time, bool) {
	loc := c.loc
	t = t.In(loc).Truncate(time.Second).Add(time.Second)
	truncated := false
	limit := t.Year() + 5
wrap:
	if t.Year() > limit {
		return time.Time{}, false
	}
	for 1<<uint(t.Month())&c.month == 0 {
		if !truncated {
			truncated = true
			t = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, loc)
		}
		if t = t.AddDate(0, 1, 0); t.Month() == time.January {
			goto wrap
		}
	}
	for !c.dayMatches(t) {
		if !truncated {
			truncated = true
			t = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
		}
		if t = t.AddDate(0, 0, 1); t.Day() == 1 {
			goto wrap
		}
	}
	for 1<<uint(t.Hour())&c.hour == 0 {
		if !truncated {
			truncated = true
			t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), 0, 0, 0, loc)
		}
		if t = t.Add(time.Hour); t.Hour() == 0 {
			goto wrap
		}
	}
	for 1<<uint(t.Minute())&c.min == 0 {
		if !truncated {
			truncated = true
			t = t.Truncate(time.Minute)
		}
		if t = t.Add(time.Minute); t.Minute() == 0 {
			goto wrap
		}
	}
	for 1<<uint(t.Second())&c.sec == 0 {
		if !truncated {
			truncated = true
			t = t.Truncate(time.Second)
		}
		if t = t.Add(time.Second); t.Second() == 0 {
			goto wrap
		}
	}
	return t, true
}

func (c *cronSpec) dayMatches(t time.Time) bool {
	domMatch := 1<<uint(t.Day())&c.dom > 0
	dowMatch := 1<<uint(t.Weekday())&c.dow > 0
	if c.dom&starBit > 0 || c.dow&starBit > 0 {
		return domMatch && dowMatch
	}
	return domMatch || dowMatch
}

// prev returns the last slot at or before t, looking back at most
// lookback (false when there is none in it).
func (c *cronSpec) prev(t time.Time, lookback time.Duration) (time.Time, bool) {
	for look := time.Minute; ; look *= 2 {
		look = min(look, lookback)
		var last time.Time
		found := false
		for s, ok := c.next(t.Add(-look)); ok && !s.After(t); s, ok = c.next(s) {
			last, found = s, true
		}
		if found {
			return last, true
		}
		if look >= lookback {
			return time.Time{}, false
		}
	}
}
