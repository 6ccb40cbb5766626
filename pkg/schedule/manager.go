package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// Headers of a schedule message that only lovia reads back (the server
// copies them onto each fire too, which is harmless).
const (
	headerSpec = "Lovia-Schedule-Spec"
	headerTZ   = "Lovia-Schedule-Tz"
	// MetadataKey is the run metadata key naming the schedule that fired
	// a run.
	MetadataKey = "schedule"
)

// DefaultTimeout bounds each call whose context has no deadline.
const DefaultTimeout = 10 * time.Second

// Manager adds, lists, pauses, resumes and removes schedules. It keeps no
// state: the schedules stream is the only record, so any number of
// Managers in any processes agree. It is safe for concurrent use; calls on
// one schedule from two places at once are ordered by the stream (the
// loser of a race gets an error and may try again).
type Manager struct {
	js         jetstream.JetStream
	names      bus.Names
	now        func() time.Time
	checkAgent func(ctx context.Context, agent string) error
}

// Config configures a Manager.
type Config struct {
	// JS is the JetStream context (required).
	JS jetstream.JetStream
	// Prefix is the subject prefix (default bus.DefaultPrefix).
	Prefix string
	// Now is the clock (default time.Now); an At must be after it.
	Now func() time.Time
	// CheckAgent, when set, is asked about a schedule's agent on Add: an
	// error (the API's: UnknownAgent, as a submit) refuses the schedule.
	CheckAgent func(ctx context.Context, agent string) error
}

// New returns a Manager. The streams must be provisioned (bus.Provision).
func New(cfg Config) (*Manager, error) {
	if cfg.JS == nil {
		return nil, errors.New("schedule: Config.JS is required")
	}
	names, err := bus.NewNames(cfg.Prefix)
	if err != nil {
		return nil, fmt.Errorf("schedule: Config.Prefix: %w", err)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Manager{js: cfg.JS, names: names, now: cfg.Now, checkAgent: cfg.CheckAgent}, nil
}

// Add creates schedule s; it refuses a name in use (ErrExists). Its first
// fire is at At, an Every after now, or on the next cron match.
func (m *Manager) Add(ctx context.Context, s Schedule) (Schedule, error) {
	s.Paused, s.Next = false, time.Time{}
	s.At = s.At.Truncate(time.Second)
	if err := s.Validate(m.now()); err != nil {
		return Schedule{}, err
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	if m.checkAgent != nil {
		if err := m.checkAgent(ctx, s.Agent); err != nil {
			return Schedule{}, err
		}
	}
	msg, err := m.message(&s, false)
	if err != nil {
		return Schedule{}, err
	}
	if err := bus.EnsureScheduleSource(ctx, m.js, m.names); err != nil {
		return Schedule{}, m.sourceError(err)
	}
	if _, err := m.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(0)); err != nil {
		if isWrongLastSeq(err) {
			return Schedule{}, exists(s.Name)
		}
		return Schedule{}, m.publishError("add", s.Name, err)
	}
	now := m.now()
	s.Next = s.NextFire(now, now)
	return s, nil
}

// Get returns the schedule named name.
func (m *Manager) Get(ctx context.Context, name string) (Schedule, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	s, _, err := m.get(ctx, name)
	return s, err
}

// List returns every schedule, by name.
func (m *Manager) List(ctx context.Context) ([]Schedule, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	_, _, names, err := m.scheduleNames(ctx, "list")
	if err != nil {
		return nil, err
	}
	var out []Schedule
	for _, name := range names {
		s, _, err := m.get(ctx, name)
		if errors.Is(err, ErrNotFound) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// scheduleNames returns the schedules stream, its info (subjects filtered
// to the schedules) and the names of the schedules it holds, sorted; op
// names the caller in an error.
func (m *Manager) scheduleNames(ctx context.Context, op string) (jetstream.Stream, *jetstream.StreamInfo, []string, error) {
	st, err := m.js.Stream(ctx, m.names.SchedulesStream())
	if err != nil {
		return nil, nil, nil, m.streamError(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(m.names.ScheduleWildcard()))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("schedule: %s: %w", op, err)
	}
	names := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		if name, err := m.names.ParseSchedule(subj); err == nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return st, info, names, nil
}

// Remove deletes the schedule: it fires no more. Runs it already fired are
// ordinary runs and are not touched.
func (m *Manager) Remove(ctx context.Context, name string) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	if _, _, err := m.get(ctx, name); err != nil {
		return err
	}
	subj, _ := m.names.Schedule(name)
	st, err := m.js.Stream(ctx, m.names.SchedulesStream())
	if err != nil {
		return m.streamError(err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
		return fmt.Errorf("schedule: remove %s: %w", name, err)
	}
	return nil
}

// Pause stops the schedule firing and keeps its definition. Pausing a
// paused schedule does nothing.
func (m *Manager) Pause(ctx context.Context, name string) (Schedule, error) {
	return m.setPaused(ctx, name, true)
}

// Resume starts a paused schedule again, afresh from now: an @every fires
// an interval after the resume, a cron on its next match, an @at whose
// time passed while paused fires once, at once. Fires missed while paused
// are not made up one by one.
func (m *Manager) Resume(ctx context.Context, name string) (Schedule, error) {
	return m.setPaused(ctx, name, false)
}

func (m *Manager) setPaused(ctx context.Context, name string, paused bool) (Schedule, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	s, seq, err := m.get(ctx, name)
	if err != nil {
		return Schedule{}, err
	}
	if s.Paused == paused {
		return s, nil
	}
	s.Paused = paused
	msg, err := m.message(&s, paused)
	if err != nil {
		return Schedule{}, err
	}
	if !paused {
		if err := bus.EnsureScheduleSource(ctx, m.js, m.names); err != nil {
			return Schedule{}, m.sourceError(err)
		}
	}
	if _, err := m.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(seq)); err != nil {
		if isWrongLastSeq(err) {
			return Schedule{}, fmt.Errorf("schedule: %s changed meanwhile; look at it again (`lovia schedule ls`) and retry: %w", name, err)
		}
		op := "resume"
		if paused {
			op = "pause"
		}
		return Schedule{}, m.publishError(op, name, err)
	}
	now := m.now()
	s.Next = s.NextFire(now, now)
	return s, nil
}

// message builds the schedule message of s: the run request each fire
// submits as its body, the server's schedule headers (none when paused)
// and lovia's, which carry the definition.
func (m *Manager) message(s *Schedule, paused bool) (*nats.Msg, error) {
	subj, err := m.names.Schedule(s.Name)
	if err != nil {
		return nil, invalid("name", bus.ErrorFor(err).Message, "name schedules with 1–100 characters of [A-Za-z0-9_-]")
	}
	target, err := m.names.Fire(s.Agent)
	if err != nil {
		return nil, invalid("agent", bus.ErrorFor(err).Message, "agent names are 1–128 characters of [A-Za-z0-9_-]")
	}
	body, err := json.Marshal(bus.RunRequest{
		Agent:     s.Agent,
		Input:     bus.TextInput(s.Input),
		SessionID: s.SessionID,
		Metadata:  map[string]any{MetadataKey: s.Name},
	})
	if err != nil {
		return nil, err
	}
	msg := nats.NewMsg(subj)
	msg.Data = body
	h := msg.Header
	h.Set(bus.HeaderContentType, bus.ContentTypeJSON)
	h.Set(bus.HeaderSchedule, s.Name)
	h.Set(headerSpec, s.Pattern())
	if s.TimeZone != "" {
		h.Set(headerTZ, s.TimeZone)
	}
	if !s.At.IsZero() {
		h.Set(bus.HeaderScheduleAt, s.At.UTC().Format(time.RFC3339))
	}
	// The schedules stream's MaxAge drops fires, never a schedule.
	h.Set("Nats-TTL", "never")
	if paused {
		h.Set(bus.HeaderSchedulePaused, "true")
		h.Set("Nats-Rollup", "sub")
		return msg, nil
	}
	h.Set("Nats-Schedule", s.Pattern())
	h.Set("Nats-Schedule-Target", target)
	if s.TimeZone != "" {
		h.Set("Nats-Schedule-Time-Zone", s.TimeZone)
	}
	return msg, nil
}

// get reads a schedule back from its message.
func (m *Manager) get(ctx context.Context, name string) (Schedule, uint64, error) {
	subj, err := m.names.Schedule(name)
	if err != nil {
		return Schedule{}, 0, invalid("name", bus.ErrorFor(err).Message, "name schedules with 1–100 characters of [A-Za-z0-9_-]")
	}
	st, err := m.js.Stream(ctx, m.names.SchedulesStream())
	if err != nil {
		return Schedule{}, 0, m.streamError(err)
	}
	raw, err := st.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return Schedule{}, 0, notFound(name)
	}
	if err != nil {
		return Schedule{}, 0, fmt.Errorf("schedule: get %s: %w", name, err)
	}
	s, err := decode(name, raw)
	if err == nil {
		s.Next = s.NextFire(raw.Time, m.now())
	}
	return s, raw.Sequence, err
}

func decode(name string, raw *jetstream.RawStreamMsg) (Schedule, error) {
	var req bus.RunRequest
	if err := json.Unmarshal(raw.Data, &req); err != nil {
		return Schedule{}, fmt.Errorf("schedule: %s: the stored run request does not decode: %w", name, err)
	}
	s := Schedule{Name: name, Agent: req.Agent, Input: req.Input.Text, SessionID: req.SessionID,
		TimeZone: raw.Header.Get(headerTZ), Paused: raw.Header.Get(bus.HeaderSchedulePaused) == "true"}
	spec := raw.Header.Get(headerSpec)
	switch {
	case strings.HasPrefix(spec, "@at "):
		s.At, _ = time.Parse(time.RFC3339, strings.TrimPrefix(spec, "@at "))
	case strings.HasPrefix(spec, "@every "):
		d, _ := time.ParseDuration(strings.TrimPrefix(spec, "@every "))
		s.Every = Duration(d)
	default:
		s.Cron = spec
	}
	return s, nil
}

// publishError translates the server's refusals of a schedule message.
func (m *Manager) publishError(op, name string, err error) error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch {
		case strings.Contains(apiErr.Description, "pattern"):
			return invalid("when", "the server refused the schedule: "+apiErr.Description,
				"check --at (RFC 3339), --every (at least 1s) or --cron (six fields, seconds first)")
		case strings.Contains(apiErr.Description, "time zone"):
			return invalid("time_zone", "the server refused the zone: "+apiErr.Description, "use an IANA zone name such as Europe/Paris")
		case strings.Contains(apiErr.Description, "disabled"):
			return fmt.Errorf("schedule: %s %s: %w (start a lovia worker or gateway once: they provision the schedules stream)", op, name, err)
		}
	}
	if errors.Is(err, jetstream.ErrNoStreamResponse) {
		return fmt.Errorf("schedule: %s %s: no schedules stream answered: %w (start a lovia worker or gateway once: they provision the streams)", op, name, err)
	}
	return fmt.Errorf("schedule: %s %s: %w", op, name, err)
}

func (m *Manager) sourceError(err error) error {
	if errors.Is(err, bus.ErrStreamMissing) {
		return fmt.Errorf("schedule: %w (start a lovia worker or gateway once: they provision the streams)", err)
	}
	return fmt.Errorf("schedule: %w", err)
}

func (m *Manager) streamError(err error) error {
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("%w: %s: %w (start a lovia worker or gateway once: they provision the streams)", bus.ErrStreamMissing, m.names.SchedulesStream(), err)
	}
	return fmt.Errorf("schedule: %s: %w", m.names.SchedulesStream(), err)
}

// isWrongLastSeq reports the server's refusal of an expected last
// subject sequence (10071).
func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

func withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, DefaultTimeout)
}
