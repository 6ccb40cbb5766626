package bus

import (
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// Headers of schedules (see package schedule). The server copies every
// header of a schedule message onto each message it fires, except its own
// Nats-Schedule* headers, and adds HeaderScheduler and HeaderScheduleNext.
const (
	// HeaderSchedule names the schedule a run request was fired by.
	HeaderSchedule = "Lovia-Schedule"
	// HeaderScheduleAt is the time of a one-off (@at) schedule, RFC 3339:
	// its fire carries no next time, so its run id is derived from this.
	HeaderScheduleAt = "Lovia-Schedule-At"
	// HeaderSchedulePaused marks a paused schedule's message: it keeps the
	// definition and has no Nats-Schedule header, so it never fires.
	HeaderSchedulePaused = "Lovia-Schedule-Paused"
	// HeaderScheduler is set by the server on a fired message: the subject
	// of the schedule message that fired it.
	HeaderScheduler = "Nats-Scheduler"
	// HeaderScheduleNext is set by the server on a fired message: the next
	// fire of the schedule (RFC 3339 with nanoseconds), or "purge" for the
	// only fire of an @at schedule.
	HeaderScheduleNext = "Nats-Schedule-Next"
	// ScheduleNextPurge is HeaderScheduleNext on the fire of an @at
	// schedule.
	ScheduleNextPurge = "purge"
)

// ScheduledRunIDPrefix starts the run id of every scheduled run.
const ScheduledRunIDPrefix = "sched-"

// MaxScheduleNameLen is the longest schedule name, so that
// ScheduledRunID stays within MaxIDLen.
const MaxScheduleNameLen = 100

// ScheduledRunID is the run id of a run request the server fired for a
// schedule: sched-<name>-<unix seconds>, from headers alone. The seconds
// are the fire's slot: for a repeating schedule the next fire the server
// stamped on it (HeaderScheduleNext, the same on every copy of one fire),
// for an @at schedule its time (HeaderScheduleAt). So a fire delivered or
// stored twice is one run. It returns "" for a message that is not a
// schedule's fire, or whose headers do not parse.
func ScheduledRunID(h nats.Header) string {
	name := headerValue(h, HeaderSchedule)
	next := headerValue(h, HeaderScheduleNext)
	if name == "" || next == "" || len(name) > MaxScheduleNameLen || ValidateID("schedule", name) != nil {
		return ""
	}
	var slot time.Time
	var err error
	if next == ScheduleNextPurge {
		slot, err = time.Parse(time.RFC3339, headerValue(h, HeaderScheduleAt))
	} else {
		slot, err = time.Parse(time.RFC3339Nano, next)
	}
	if err != nil {
		return ""
	}
	return ScheduledRunIDAt(name, slot)
}

// ScheduledRunIDAt is the run id of schedule name's fire in slot (see
// ScheduledRunID).
func ScheduledRunIDAt(name string, slot time.Time) string {
	return ScheduledRunIDPrefix + name + "-" + strconv.FormatInt(slot.Unix(), 10)
}
