package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// cronSpec is a parsed six-field cron expression, matched as the NATS
// server's message scheduler matches it (a star in either day field makes
// the two day fields AND, not OR), so the slots the catch-up computes are
// the slots the server fires.
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

// cron parses s's cron expression in its time zone (UTC when it names
// none).
func (s *Schedule) cron() (*cronSpec, error) {
	var loc *time.Location
	if s.TimeZone != "" {
		l, err := time.LoadLocation(s.TimeZone)
		if err != nil {
			return nil, err
		}
		loc = l
	}
	return parseCron(s.Cron, loc)
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
// there is none within five years. While a field does not match, t moves
// to the start of that field's next unit, coarsest field first: the next
// month, day, hour, minute or second, each starting at its zero.
func (c *cronSpec) next(t time.Time) (time.Time, bool) {
	loc := c.loc
	t = t.In(loc).Truncate(time.Second).Add(time.Second)
	limit := t.AddDate(5, 0, 0)
	for t.Before(limit) {
		y, mo, d := t.Date()
		h, mi, sec := t.Clock()
		switch {
		case !hasBit(c.month, int(mo)):
			t = time.Date(y, mo+1, 1, 0, 0, 0, 0, loc)
		case !c.dayMatches(t):
			t = time.Date(y, mo, d+1, 0, 0, 0, 0, loc)
		case !hasBit(c.hour, h):
			t = time.Date(y, mo, d, h+1, 0, 0, 0, loc)
		case !hasBit(c.min, mi):
			t = t.Truncate(time.Minute).Add(time.Minute)
		case !hasBit(c.sec, sec):
			t = t.Add(time.Second)
		default:
			return t, true
		}
	}
	return time.Time{}, false
}

// hasBit reports whether field's bit for value v is set.
func hasBit(field uint64, v int) bool { return field&(1<<uint(v)) != 0 }

func (c *cronSpec) dayMatches(t time.Time) bool {
	domMatch := hasBit(c.dom, t.Day())
	dowMatch := hasBit(c.dow, int(t.Weekday()))
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
