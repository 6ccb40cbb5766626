package schedule

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// HeaderMissed is on a catch-up fire (see [Manager.CatchUp]): the slot,
// RFC 3339, that the server did not fire.
const HeaderMissed = "Lovia-Schedule-Missed"

// DefaultGrace is how long past its slot a fire may be late before
// CatchUp takes it for missed: the server fires a slot up to a quarter of
// a second late, more on a loaded machine.
const DefaultGrace = 3 * time.Second

// catchUpTries bounds the attempts at one schedule's catch-up that lose
// the race for its fire subject (another fire stored meanwhile).
const catchUpTries = 3

// CatchUp fires, once, each repeating schedule whose last slot came due
// with no fire: the slot a NATS server lost when it crashed (kill -9)
// before writing its schedule state, which it then recomputes from the
// schedule message and skips. It returns the run ids it fired. Call it
// once the server has been up for grace: a server that restarted cleanly
// fires its missed slot itself, a quarter of a second after it starts.
//
// A slot counts as due once grace (default DefaultGrace) has passed it;
// slots before the schedule was added or resumed, and slots older than
// the schedules stream's max age (their fires may have aged out), are
// never made up. A catch-up fire is the fire the server would have made:
// on <p>.fire.<agent>, with the schedule's run request, run id
// sched-<name>-<unix> from the slot after the missed one (the run id the
// missed fire would have had) in its Nats-Msg-Id, and HeaderMissed. It is
// published on the condition that nothing was stored on the fire subject
// since CatchUp looked, so any number of processes may run CatchUp at
// once: one of them fires, the others see its fire.
func (m *Manager) CatchUp(ctx context.Context, grace time.Duration) ([]string, error) {
	if grace <= 0 {
		grace = DefaultGrace
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	// A look that straddles a reconnect may have read a server that just
	// restarted and has not fired what it still knows yet: it fires
	// nothing (ErrReconnected) and is made again a grace later.
	reconnects := m.js.Conn().Stats().Reconnects
	steady := func() error {
		if m.js.Conn().Stats().Reconnects != reconnects || !m.js.Conn().IsConnected() {
			return ErrReconnected
		}
		return nil
	}
	st, info, names, err := m.scheduleNames(ctx, "catch up")
	if err != nil {
		return nil, err
	}
	var fired []string
	var errs []error
	for _, name := range names {
		id, err := m.catchUpOne(ctx, st, info.Config.MaxAge, name, grace, steady)
		if errors.Is(err, ErrReconnected) {
			return fired, err
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("schedule: catch up %s: %w", name, err))
		}
		if id != "" {
			fired = append(fired, id)
		}
	}
	return fired, errors.Join(errs...)
}

// catchUpOne checks one schedule and fires its missed slot; it returns
// the run id it fired, or "".
func (m *Manager) catchUpOne(ctx context.Context, st jetstream.Stream, maxAge time.Duration, name string, grace time.Duration, steady func() error) (string, error) {
	for try := 0; ; try++ {
		subj, _ := m.names.Schedule(name)
		raw, err := st.GetLastMsgForSubject(ctx, subj)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return "", nil // removed meanwhile
		}
		if err != nil {
			return "", err
		}
		s, err := decode(name, raw)
		if err != nil {
			return "", err
		}
		if s.Paused || !s.At.IsZero() || raw.Header.Get("Nats-Schedule") == "" {
			// Paused, or an @at: the server fires a past @at at once when
			// it recovers, even after a crash.
			return "", nil
		}
		now := m.now()
		slot, runSlot, due, err := dueSlot(&s, now.Add(-grace))
		if err != nil || !due || slot.Before(raw.Time) {
			return "", err // nothing due since the schedule was added or resumed
		}
		if maxAge > 0 && slot.Before(now.Add(-maxAge+time.Minute)) {
			return "", nil // its fire may have aged out of the stream
		}
		fire, _ := m.names.Fire(s.Agent)
		lastSeq, fired, err := firedSince(ctx, m.js, st, fire, name, slot)
		if err != nil || fired {
			return "", err
		}
		id := bus.ScheduledRunIDAt(name, runSlot)
		msg := nats.NewMsg(fire)
		msg.Data = raw.Data
		for _, k := range []string{bus.HeaderContentType, bus.HeaderSchedule, headerSpec, headerTZ} {
			if v := raw.Header.Get(k); v != "" {
				msg.Header.Set(k, v)
			}
		}
		msg.Header.Set(HeaderMissed, slot.UTC().Format(time.RFC3339))
		msg.Header.Set(bus.HeaderMsgID, id)
		if err := steady(); err != nil {
			return "", err
		}
		_, err = m.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(lastSeq))
		if err == nil {
			return id, nil
		}
		if !isWrongLastSeq(err) || try+1 >= catchUpTries {
			return "", err
		}
		// Something was fired meanwhile (by the server or another
		// process's catch-up): look again.
	}
}

// dueSlot returns the last slot of s at or before due, and the slot the
// server would stamp as a fire's next on a fire for it (which names the
// run); due is false when s has no slot to check. An @every's slots
// follow its last fire, so its "last slot" is an interval before due: a
// healthy @every fired since.
func dueSlot(s *Schedule, due time.Time) (slot, runSlot time.Time, ok bool, err error) {
	if s.Every != 0 {
		every := time.Duration(s.Every)
		return due.Add(-every), due.Round(time.Second).Add(every), true, nil
	}
	c, err := s.cron()
	if err != nil {
		return time.Time{}, time.Time{}, false, err
	}
	slot, ok = c.prev(due, 400*24*time.Hour)
	if !ok {
		return time.Time{}, time.Time{}, false, nil
	}
	runSlot, ok = c.next(due)
	return slot, runSlot, ok, nil
}

// firedSince reports whether schedule name fired on subject fire at or
// after since, with the last sequence stored on fire (0: none) that the
// answer holds for.
func firedSince(ctx context.Context, js jetstream.JetStream, st jetstream.Stream, fire, name string, since time.Time) (uint64, bool, error) {
	last, err := st.GetLastMsgForSubject(ctx, fire)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if last.Time.Before(since) {
		return last.Sequence, false, nil
	}
	if last.Header.Get(bus.HeaderSchedule) == name {
		return last.Sequence, true, nil
	}
	// The agent's last fire is another schedule's: read the agent's fires
	// since then (headers only) up to it.
	c, err := st.CreateConsumer(ctx, jetstream.ConsumerConfig{
		FilterSubject: fire, DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &since,
		AckPolicy: jetstream.AckNonePolicy, HeadersOnly: true, MemoryStorage: true, InactiveThreshold: time.Minute,
	})
	if err != nil {
		return 0, false, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = js.DeleteConsumer(dctx, st.CachedInfo().Config.Name, c.CachedInfo().Name)
	}()
	for {
		batch, err := c.FetchNoWait(256)
		if err != nil {
			return 0, false, err
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			if msg.Headers().Get(bus.HeaderSchedule) == name {
				return last.Sequence, true, nil
			}
			if meta, err := msg.Metadata(); err == nil && meta.Sequence.Stream >= last.Sequence {
				return last.Sequence, false, nil
			}
		}
		if err := batch.Error(); err != nil {
			return 0, false, err
		}
		if n == 0 {
			return last.Sequence, false, nil
		}
	}
}
