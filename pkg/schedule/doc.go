// Package schedule runs agents on a schedule — once at a time, every
// interval, or on a cron expression in a time zone — on JetStream message
// scheduling (nats-server 2.14+), not on a timer loop in a worker: a
// schedule fires while no worker is up, and its runs wait in the runs
// stream until one is.
//
// # Where schedules live
//
// A [Schedule] is one message on <p>.schedule.<name> in the schedules
// stream (<P>_SCHEDULES, which has AllowMsgSchedules). The server fires
// only to a subject of the schedule's own stream, and refuses schedules on
// a stream that discards new messages when full, which the runs stream
// does (a full queue refuses new runs rather than drop waiting ones). So a
// schedule targets <p>.fire.<agent> in the schedules stream, and the runs
// stream sources that subject, rewritten to <p>.submit.<agent> (the
// source is added by the first Add or Resume, bus.EnsureScheduleSource, so
// a fleet without schedules runs no source consumer): a fire is
// an ordinary run request, claimed by the workers serving the agent, with
// events, status and approvals like any run. The message's body is that
// run request, with the schedule's name in its metadata (key
// [MetadataKey]); its headers hold the definition (Nats-Schedule,
// Nats-Schedule-Target, Nats-Schedule-Time-Zone, and lovia's own), and
// Nats-TTL: never keeps it past the stream's max age, which drops fires
// only. The server rolls each schedule subject up to its latest message,
// so the stream is the one record: a [Manager] keeps no state.
//
// # Run ids
//
// The server copies the schedule's headers onto each fire and adds
// Nats-Scheduler (the schedule's subject) and Nats-Schedule-Next (its next
// fire, or "purge" for an @at). It removes Nats-Msg-Id, so a fire cannot
// be deduplicated by the stream; instead the worker derives the run id from
// the fire's headers (bus.ScheduledRunID): sched-<name>-<unix>, the Unix
// second of the fire's Nats-Schedule-Next (for an @at, its time). Every
// copy of one fire — redelivered, or sourced twice — carries the same
// headers, so it is one run; a later copy resumes or replays that run
// rather than starting another.
//
// # Missed fires, pause and remove
//
// While the server is down nothing fires; when it is back, a repeating
// schedule whose fires were missed fires once, then keeps its cadence
// from then on (the server skips ahead): missed fires coalesce into one.
// That holds when the server stopped cleanly; one that crashed before it
// wrote its schedule state recomputes each schedule from its message and
// skips the missed slot. [Manager.CatchUp] fires that slot instead, once
// (a [Keeper] runs it as it starts, after each reconnect and every
// minute; the API service runs one in every process): see its doc for
// the run id and how several processes agree on one fire.
// [Manager.Pause] replaces the schedule message by one without the
// Nats-Schedule header (the definition stays, nothing fires);
// [Manager.Resume] puts the schedule back, starting afresh: an @every
// fires an interval after the resume, a cron on its next match, an @at
// whose time passed while paused fires once, at once — fires missed while
// paused are not made up. [Manager.Remove] purges the schedule's subject;
// runs it already fired are ordinary runs and stay.
//
// # Times
//
// Cron expressions have six fields, seconds first ("0 30 9 * * 1-5" is
// 09:30:00 on weekdays), or are @hourly, @daily, @weekly, @monthly or
// @yearly; [Schedule.TimeZone] (an IANA name) applies to cron only. An @at
// is a whole second in the future; an @every at least one whole second.
package schedule
