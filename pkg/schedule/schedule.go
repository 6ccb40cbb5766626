package schedule

import (
	"strconv"
	"strings"
	"time"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// Schedule is a schedule's definition: run Agent with Input at At, every
// Every, or on Cron (in TimeZone), exactly one of the three.
type Schedule struct {
	// Name identifies the schedule: 1–100 characters of [A-Za-z0-9_-].
	Name string `json:"name"`
	// Agent is the agent each fire runs.
	Agent string `json:"agent"`
	// Input is each run's input.
	Input string `json:"input"`
	// SessionID, when set, makes every run continue that conversation.
	SessionID string `json:"session_id,omitempty"`
	// At fires once, at this time (whole seconds, in the future).
	At time.Time `json:"at,omitzero"`
	// Every fires at this interval (at least 1s), the first an interval
	// after Add or Resume.
	Every Duration `json:"every,omitzero"`
	// Cron fires on a six-field cron expression (seconds first:
	// "0 30 9 * * 1-5") or @hourly, @daily, @weekly, @monthly, @yearly.
	Cron string `json:"cron,omitempty"`
	// TimeZone is the IANA zone Cron is read in (default UTC); only with
	// Cron.
	TimeZone string `json:"time_zone,omitempty"`
	// Paused is set on listed schedules that are paused; Add ignores it.
	Paused bool `json:"paused,omitempty"`
	// Next is when a listed schedule fires next (omitted when paused or
	// done: an @at that fired); Add ignores it.
	Next time.Time `json:"next,omitzero"`
}

// Duration is a time.Duration written as a Go duration string ("90s").
type Duration time.Duration

// MarshalText writes the duration as "1m30s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return invalid("every", "want a duration such as 30s, 15m or 24h, got "+quote(string(b)), "write the interval as a number and a unit: 30s, 15m, 24h")
	}
	*d = Duration(v)
	return nil
}

// IsZero reports an unset duration.
func (d Duration) IsZero() bool { return d == 0 }

// Pattern is the schedule's Nats-Schedule header: "@at <RFC 3339>",
// "@every <duration>" or the cron expression.
func (s *Schedule) Pattern() string {
	switch {
	case !s.At.IsZero():
		return "@at " + s.At.UTC().Format(time.RFC3339)
	case s.Every != 0:
		return "@every " + time.Duration(s.Every).String()
	}
	return s.Cron
}

var predefined = map[string]bool{"@yearly": true, "@annually": true, "@monthly": true, "@weekly": true, "@daily": true, "@midnight": true, "@hourly": true}

// Validate checks the definition; now is the time an At must be after.
// Errors match ErrInvalid and name the field.
func (s *Schedule) Validate(now time.Time) error {
	const nameHint = "name schedules with 1–100 characters of [A-Za-z0-9_-]"
	if s.Name == "" {
		return invalid("name", "is required", nameHint)
	}
	// The length first: the id rules' own messages say 1–128.
	if len(s.Name) > bus.MaxScheduleNameLen {
		return invalid("name", "longer than 100 characters", nameHint)
	}
	if err := bus.ValidateID("name", s.Name); err != nil {
		return invalid("name", strings.ReplaceAll(bus.ErrorFor(err).Message, "1–128", "1–100"), nameHint)
	}
	if s.Agent == "" {
		return invalid("agent", "is required", "name the agent each fire runs (--agent)")
	}
	if err := bus.ValidateID("agent", s.Agent); err != nil {
		return invalid("agent", bus.ErrorFor(err).Message, "agent names are 1–128 characters of [A-Za-z0-9_-]")
	}
	if strings.TrimSpace(s.Input) == "" {
		return invalid("input", "is required", "give each run an input (--input TEXT)")
	}
	if s.SessionID != "" {
		if err := bus.ValidateID("session_id", s.SessionID); err != nil {
			return invalid("session_id", bus.ErrorFor(err).Message, "session ids are 1–128 characters of [A-Za-z0-9_-]")
		}
	}
	const oneHint = "give exactly one of --at TIME, --every DURATION or --cron \"EXPR\""
	n := 0
	for _, set := range []bool{!s.At.IsZero(), s.Every != 0, s.Cron != ""} {
		if set {
			n++
		}
	}
	if n != 1 {
		return invalid("when", "want exactly one of at, every and cron", oneHint)
	}
	if s.TimeZone != "" {
		if s.Cron == "" {
			return invalid("time_zone", "applies only to a cron schedule", "drop --tz, or write an --at time with its offset (2026-12-24T18:00:00+01:00)")
		}
		if _, err := time.LoadLocation(s.TimeZone); err != nil {
			return invalid("time_zone", "unknown time zone "+quote(s.TimeZone), "use an IANA zone name such as Europe/Paris or America/New_York")
		}
	}
	switch {
	case !s.At.IsZero():
		if !s.At.After(now) {
			return invalid("at", s.At.Format(time.RFC3339)+" is not in the future", "give a later time, in RFC 3339 with a zone: 2026-12-24T18:00:00Z")
		}
	case s.Every != 0:
		if time.Duration(s.Every) < time.Second {
			return invalid("every", "the interval "+time.Duration(s.Every).String()+" is under 1s", "use an interval of at least 1s")
		}
		if time.Duration(s.Every)%time.Second != 0 {
			return invalid("every", "the interval "+time.Duration(s.Every).String()+" is not whole seconds", "use whole seconds: 90s, 15m, 24h")
		}
	default:
		if strings.HasPrefix(s.Cron, "@every") || strings.HasPrefix(s.Cron, "@at") {
			every := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(s.Cron, "@every"), "@at"))
			if every == "" || strings.HasPrefix(s.Cron, "@at") {
				every = "2s"
			}
			return invalid("cron", quote(s.Cron)+" is not a cron expression",
				"an interval is every, not cron (lovia schedule add --every "+every+"), one time is at (--at 2026-12-24T18:00:00Z); cron takes six fields, seconds first, or @hourly, @daily, @weekly, @monthly")
		}
		const cronHint = "the cron expression starts with seconds: \"0 30 9 * * 1-5\" is 09:30:00 on weekdays; or use @hourly, @daily, @weekly, @monthly"
		if !predefined[s.Cron] && len(strings.Fields(s.Cron)) != 6 {
			return invalid("cron", quote(s.Cron)+" has "+strconv.Itoa(len(strings.Fields(s.Cron)))+" fields, want 6", cronHint)
		}
		c, err := parseCron(s.Cron, nil)
		if err != nil {
			return invalid("cron", quote(s.Cron)+": "+err.Error(), cronHint)
		}
		if _, ok := c.next(now); !ok {
			return invalid("cron", quote(s.Cron)+" matches no time in the next five years", cronHint)
		}
	}
	return nil
}
