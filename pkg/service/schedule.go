package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/micro"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/schedule"
)

// ScheduleNameRequest is the body of the schedule get, rm, pause and
// resume endpoints.
type ScheduleNameRequest struct {
	Name string `json:"name"`
}

// ScheduleList is the reply of <p>.api.schedule.ls.
type ScheduleList struct {
	Schedules []schedule.Schedule `json:"schedules"`
}

// ScheduleRemoved is the reply of <p>.api.schedule.rm.
type ScheduleRemoved struct {
	Removed string `json:"removed"`
}

// scheduleEndpoints adds <p>.api.schedule.{add,ls,get,rm,pause,resume}:
// JSON bodies, a schedule.Schedule for add, {"name"} for the others.
func (s *Service) scheduleEndpoints(add func(name, subject string, h func(context.Context, micro.Request) (any, error)) error) []error {
	n := s.api.names
	named := func(op func(*schedule.Manager, context.Context, string) (any, error)) func(context.Context, micro.Request) (any, error) {
		return func(ctx context.Context, r micro.Request) (any, error) {
			m, err := s.api.schedules()
			if err != nil {
				return nil, err
			}
			var req ScheduleNameRequest
			if err := decodeStrict(r.Data(), &req); err != nil {
				return nil, err
			}
			if req.Name == "" {
				return nil, &bus.APIError{Type: bus.TypeInvalidRequest, Message: "name: is required", Hint: `send {"name": "<schedule>"}`}
			}
			return op(m, ctx, req.Name)
		}
	}
	return []error{
		add("schedule_add", n.ScheduleAPI(bus.OpScheduleAdd), func(ctx context.Context, r micro.Request) (any, error) {
			m, err := s.api.schedules()
			if err != nil {
				return nil, err
			}
			var sc schedule.Schedule
			if err := decodeStrict(r.Data(), &sc); err != nil {
				return nil, err
			}
			return m.Add(ctx, sc)
		}),
		add("schedule_ls", n.ScheduleAPI(bus.OpScheduleList), func(ctx context.Context, _ micro.Request) (any, error) {
			m, err := s.api.schedules()
			if err != nil {
				return nil, err
			}
			list, err := m.List(ctx)
			if list == nil {
				list = []schedule.Schedule{}
			}
			return &ScheduleList{Schedules: list}, err
		}),
		add("schedule_get", n.ScheduleAPI(bus.OpScheduleGet), named(func(m *schedule.Manager, ctx context.Context, name string) (any, error) {
			return m.Get(ctx, name)
		})),
		add("schedule_rm", n.ScheduleAPI(bus.OpScheduleRemove), named(func(m *schedule.Manager, ctx context.Context, name string) (any, error) {
			return &ScheduleRemoved{Removed: name}, m.Remove(ctx, name)
		})),
		add("schedule_pause", n.ScheduleAPI(bus.OpSchedulePause), named(func(m *schedule.Manager, ctx context.Context, name string) (any, error) {
			return m.Pause(ctx, name)
		})),
		add("schedule_resume", n.ScheduleAPI(bus.OpScheduleResume), named(func(m *schedule.Manager, ctx context.Context, name string) (any, error) {
			return m.Resume(ctx, name)
		})),
	}
}

// startKeeper starts the schedule Keeper, which fires a slot the NATS
// server missed after a crash (every API instance runs one: the slot
// fires once).
func (s *Service) startKeeper(ctx context.Context) {
	m, err := s.api.schedules()
	if err == nil {
		s.keeper, err = schedule.NewKeeper(schedule.KeeperConfig{Manager: m, Logger: s.api.log})
	}
	if err == nil {
		err = s.keeper.Start(ctx)
	}
	if err != nil {
		s.api.log.Warn("service: the schedule keeper did not start", "err", err)
		s.keeper = nil
	}
}

func (s *Service) stopKeeper(ctx context.Context) error {
	if s.keeper == nil {
		return nil
	}
	err := s.keeper.Stop(ctx)
	s.keeper = nil
	return err
}

// schedules returns a Manager on the API's connection.
func (a *API) schedules() (*schedule.Manager, error) {
	return schedule.New(schedule.Config{JS: a.js, Prefix: a.names.Prefix(), CheckAgent: a.checkScheduleAgent})
}

// Schedules returns a schedule Manager on the API's connection and prefix
// (the gateway serves the schedule routes with it).
func (a *API) Schedules() (*schedule.Manager, error) { return a.schedules() }

// decodeStrict decodes a JSON body, refusing unknown fields.
func decodeStrict(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var ae *bus.APIError
		if errors.As(err, &ae) {
			return ae
		}
		return &bus.APIError{Type: bus.TypeInvalidRequest, Message: "the body does not decode: " + strings.TrimPrefix(err.Error(), "json: "),
			Hint: fmt.Sprintf("send JSON with the fields %s", `name, agent, input, session_id, at (RFC 3339), every ("30s"), cron, time_zone`)}
	}
	return nil
}

// DecodeSchedule decodes the JSON body of an add (unknown fields are
// refused), for the gateway to answer as the API does.
func DecodeSchedule(body []byte) (schedule.Schedule, error) {
	var sc schedule.Schedule
	err := decodeStrict(body, &sc)
	return sc, err
}
