package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/registry"
	"github.com/lovia-fleet/lovia/pkg/schedule"
)

const scheduleUsage = `add NAME --agent A --input TEXT (--at TIME | --every DURATION | --cron "EXPR" [--tz ZONE]) [--session S] | ls | get NAME | rm NAME | pause NAME | resume NAME

Scheduled runs: each fire is an ordinary run of the agent (run id
sched-<name>-<unix>), queued even while no worker is up. Cron expressions
have six fields, seconds first: "0 30 9 * * 1-5" is 09:30:00 on weekdays.`

// runSchedule is `lovia schedule`: scheduled runs.
func runSchedule(ctx context.Context, env *Env, args []string) int {
	fs := flagSet(env, "schedule", scheduleUsage)
	nf := addNATSFlags(fs, env)
	agent := fs.String("agent", "", "add: the agent each fire runs")
	input := fs.String("input", "", "add: each run's input")
	session := fs.String("session", "", "add: continue this session on every run")
	at := fs.String("at", "", "add: fire once at this time (RFC 3339: 2026-12-24T18:00:00Z)")
	every := fs.Duration("every", 0, "add: fire at this interval (at least 1s: 30s, 15m, 24h)")
	cron := fs.String("cron", "", `add: fire on this six-field cron expression ("0 30 9 * * 1-5") or @hourly, @daily, @weekly`)
	tz := fs.String("tz", "", "add: the IANA time zone --cron is read in (default UTC)")
	asJSON := fs.Bool("json", false, "ls, get: print the schedules as JSON")
	pos, ok := parse(fs, args)
	if !ok {
		return ExitUsage
	}
	if code, ok := subcommand(env, fs, "schedule", scheduleUsage, pos,
		subcmd{"add", 2}, subcmd{"ls", 1}, subcmd{"get", 2}, subcmd{"rm", 2}, subcmd{"pause", 2}, subcmd{"resume", 2}); !ok {
		return code
	}
	var sc schedule.Schedule
	if pos[0] == "add" {
		sc = schedule.Schedule{Name: pos[1], Agent: *agent, Input: *input, SessionID: *session,
			Every: schedule.Duration(*every), Cron: *cron, TimeZone: *tz}
		if *at != "" {
			t, err := time.Parse(time.RFC3339, *at)
			if err != nil {
				return usageErr(env, fs, fmt.Sprintf("--at %q: want an RFC 3339 time with a zone, such as 2026-12-24T18:00:00Z or 2026-12-24T18:00:00+01:00", *at))
			}
			sc.At = t
		}
		// Check before connecting: bad input needs no server.
		if err := sc.Validate(time.Now()); err != nil {
			return fail(env.Stderr, err)
		}
	}
	nc, err := nf.connect("schedule")
	if err != nil {
		return fail(env.Stderr, err)
	}
	defer nc.Close()
	rctx, cancel := requestCtx(ctx)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		return fail(env.Stderr, err)
	}
	names, err := bus.NewNames(nf.prefix)
	if err != nil {
		return usageErr(env, fs, err.Error())
	}
	m, err := schedule.New(schedule.Config{JS: js, Prefix: nf.prefix, CheckAgent: scheduleAgentCheck(js, names)})
	if err != nil {
		return usageErr(env, fs, err.Error())
	}
	switch pos[0] {
	case "add":
		s, err := m.Add(rctx, sc)
		if err != nil {
			return fail(env.Stderr, err)
		}
		fmt.Fprintf(env.Stdout, "schedule %s added: %s runs %s; next fire %s\n", s.Name, scheduleWhen(s), s.Agent, nextText(s.Next, time.Now()))
		if served := servedBy(rctx, js, names); served != nil && served[s.Agent] == 0 {
			fmt.Fprintf(env.Stderr, "lovia: no live worker serves agent %s yet: its fires wait, queued, until one does (lovia workers lists what each serves)\n", s.Agent)
		}
	case "ls":
		list, err := m.List(rctx)
		if err != nil {
			return fail(env.Stderr, err)
		}
		if *asJSON {
			if list == nil {
				list = []schedule.Schedule{}
			}
			printJSON(env, map[string]any{"schedules": list})
			return ExitOK
		}
		printSchedules(env.Stdout, list, time.Now())
	case "get":
		s, err := m.Get(rctx, pos[1])
		if err != nil {
			return fail(env.Stderr, err)
		}
		if *asJSON {
			printJSON(env, s)
			return ExitOK
		}
		printSchedule(env.Stdout, s, time.Now())
	case "rm":
		if err := m.Remove(rctx, pos[1]); err != nil {
			return fail(env.Stderr, err)
		}
		fmt.Fprintf(env.Stdout, "schedule %s removed (runs it already fired are kept)\n", pos[1])
	case "pause":
		if _, err := m.Pause(rctx, pos[1]); err != nil {
			return fail(env.Stderr, err)
		}
		fmt.Fprintf(env.Stdout, "schedule %s paused (lovia schedule resume %s starts it again)\n", pos[1], pos[1])
	case "resume":
		s, err := m.Resume(rctx, pos[1])
		if err != nil {
			return fail(env.Stderr, err)
		}
		fmt.Fprintf(env.Stdout, "schedule %s resumed: %s\n", s.Name, scheduleWhen(s))
	}
	return ExitOK
}

// scheduleAgentCheck refuses, as a submit does (UnknownAgent, with the
// same hint), a schedule for an agent that no live worker serves, no
// worker served before (its runs would wait for one that serves it again)
// and the agents registry does not hold. When the fleet cannot be read at
// all it lets the schedule through.
func scheduleAgentCheck(js jetstream.JetStream, names bus.Names) func(context.Context, string) error {
	return func(ctx context.Context, agent string) error {
		served := servedBy(ctx, js, names)
		if served[agent] > 0 {
			return nil
		}
		consumers, cerr := bus.AgentConsumers(ctx, js, names)
		if slices.Contains(consumers, agent) {
			return nil
		}
		if reg, err := registry.Ensure(ctx, js, names, 0); err == nil {
			if _, err := reg.Get(ctx, agent); err == nil {
				return nil
			}
		}
		if served == nil && cerr != nil {
			return nil
		}
		live := make([]string, 0, len(served))
		for a := range served {
			live = append(live, a)
		}
		return bus.UnknownAgentError(agent, live, false)
	}
}

// scheduleWhen is when a schedule fires, for people.
func scheduleWhen(s schedule.Schedule) string {
	switch {
	case !s.At.IsZero():
		return "at " + s.At.UTC().Format(time.RFC3339)
	case s.Every != 0:
		return "every " + time.Duration(s.Every).String()
	case s.TimeZone != "":
		return "cron " + s.Cron + " (" + s.TimeZone + ")"
	}
	return "cron " + s.Cron + " (UTC)"
}

func scheduleClip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// printSchedules writes the schedules as a table, with each one's next
// fire.
func printSchedules(w io.Writer, list []schedule.Schedule, now time.Time) {
	if len(list) == 0 {
		fmt.Fprintln(w, "no schedules (add one with lovia schedule add)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tAGENT\tWHEN\tSTATE\tNEXT\tSESSION\tINPUT")
	for _, s := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Agent, scheduleWhen(s), scheduleState(s), nextText(s.Next, now), dash(s.SessionID), scheduleClip(s.Input, 40))
	}
	_ = tw.Flush()
}

// printSchedule writes one schedule and how to find its runs.
func printSchedule(w io.Writer, s schedule.Schedule, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "schedule\t%s\n", s.Name)
	fmt.Fprintf(tw, "agent\t%s\n", s.Agent)
	fmt.Fprintf(tw, "when\t%s\n", scheduleWhen(s))
	fmt.Fprintf(tw, "state\t%s\n", scheduleState(s))
	fmt.Fprintf(tw, "next\t%s\n", nextText(s.Next, now))
	if s.SessionID != "" {
		fmt.Fprintf(tw, "session\t%s\n", s.SessionID)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\ninput:\n%s\n\nits runs: lovia runs list --schedule %s\n", indent(strings.TrimRight(s.Input, "\n"), "  "), s.Name)
}

func scheduleState(s schedule.Schedule) string {
	if s.Paused {
		return "paused"
	}
	return "active"
}

// nextText is a next fire for people: its time and how far ahead.
func nextText(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := t.Sub(now).Round(time.Second)
	if d <= 0 {
		return t.UTC().Format(time.RFC3339) + " (now)"
	}
	return t.UTC().Format(time.RFC3339) + " (in " + d.String() + ")"
}
