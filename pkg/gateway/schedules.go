package gateway

import (
	"net/http"

	"github.com/lovia-fleet/lovia/pkg/schedule"
	"github.com/lovia-fleet/lovia/pkg/service"
)

// Schedules over HTTP (see package schedule).
//
//	POST   /v1/schedules               {name, agent, input, session_id?, at | every | cron, time_zone?} → 201 the schedule
//	GET    /v1/schedules               → {schedules: [...]}, by name
//	GET    /v1/schedules/{name}        → the schedule
//	DELETE /v1/schedules/{name}        → {removed}
//	POST   /v1/schedules/{name}/pause  → the schedule, paused
//	POST   /v1/schedules/{name}/resume → the schedule
const (
	routeScheduleAdd    = "POST /v1/schedules"
	routeScheduleList   = "GET /v1/schedules"
	routeScheduleGet    = "GET /v1/schedules/{name}"
	routeScheduleRemove = "DELETE /v1/schedules/{name}"
	routeSchedulePause  = "POST /v1/schedules/{name}/pause"
	routeScheduleResume = "POST /v1/schedules/{name}/resume"
)

// scheduleRoutes are the schedule routes and their handlers.
func (g *Gateway) scheduleRoutes() map[string]http.HandlerFunc {
	return map[string]http.HandlerFunc{
		routeScheduleAdd:  g.scheduleAdd,
		routeScheduleList: g.scheduleList,
		routeScheduleGet:  g.scheduleNamed(func(r *http.Request, m *schedule.Manager, name string) (any, error) { return m.Get(r.Context(), name) }),
		routeScheduleRemove: g.scheduleNamed(func(r *http.Request, m *schedule.Manager, name string) (any, error) {
			return &service.ScheduleRemoved{Removed: name}, m.Remove(r.Context(), name)
		}),
		routeSchedulePause: g.scheduleNamed(func(r *http.Request, m *schedule.Manager, name string) (any, error) {
			return m.Pause(r.Context(), name)
		}),
		routeScheduleResume: g.scheduleNamed(func(r *http.Request, m *schedule.Manager, name string) (any, error) {
			return m.Resume(r.Context(), name)
		}),
	}
}

func isScheduleRoute(pattern string) bool {
	switch pattern {
	case routeScheduleAdd, routeScheduleList, routeScheduleGet, routeScheduleRemove, routeSchedulePause, routeScheduleResume:
		return true
	}
	return false
}

func (g *Gateway) scheduleAdd(w http.ResponseWriter, r *http.Request) {
	m, err := g.cfg.API.Schedules()
	if err != nil {
		g.fail(w, r, err)
		return
	}
	body, herr := g.readBody(w, r)
	if herr != nil {
		g.fail(w, r, herr)
		return
	}
	sc, err := service.DecodeSchedule(body)
	if err != nil {
		g.fail(w, r, err)
		return
	}
	out, err := m.Add(r.Context(), sc)
	g.reply(w, r, http.StatusCreated, out, err)
}

func (g *Gateway) scheduleList(w http.ResponseWriter, r *http.Request) {
	m, err := g.cfg.API.Schedules()
	if err != nil {
		g.fail(w, r, err)
		return
	}
	list, err := m.List(r.Context())
	if list == nil {
		list = []schedule.Schedule{}
	}
	g.reply(w, r, http.StatusOK, &service.ScheduleList{Schedules: list}, err)
}

func (g *Gateway) scheduleNamed(op func(*http.Request, *schedule.Manager, string) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		m, err := g.cfg.API.Schedules()
		if err != nil {
			g.fail(w, r, err)
			return
		}
		out, err := op(r, m, r.PathValue("name"))
		g.reply(w, r, http.StatusOK, out, err)
	}
}
