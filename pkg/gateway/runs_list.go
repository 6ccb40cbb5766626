package gateway

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// The run listing over HTTP (docs/protocol.md#listing-runs).
//
//	GET /v1/runs?agent=&status=&session=&worker=&parent=&schedule=&since=&until=&awaiting=true&limit=&cursor=
//	    → {runs: [...], next_cursor, counts: {queued, running, parked, completed, failed}}
//	GET /v1/runs/{id}/describe → the run's description
const (
	routeRunsList    = "GET /v1/runs"
	routeRunDescribe = "GET /v1/runs/{id}/describe"
)

// runsListRoutes are the listing routes and their handlers.
func (g *Gateway) runsListRoutes() map[string]http.HandlerFunc {
	return map[string]http.HandlerFunc{routeRunsList: g.runsList, routeRunDescribe: g.runDescribe}
}

func isRunsListRoute(pattern string) bool {
	return pattern == routeRunsList || pattern == routeRunDescribe
}

// listParams are the query parameters of GET /v1/runs, sorted.
var listParams = []string{"agent", "awaiting", "cursor", "limit", "parent", "schedule", "session", "since", "status", "until", "worker"}

func (g *Gateway) runsList(w http.ResponseWriter, r *http.Request) {
	req, herr := listRequest(r)
	if herr != nil {
		g.fail(w, r, herr)
		return
	}
	rep, err := g.cfg.API.ListRuns(r.Context(), req)
	g.reply(w, r, http.StatusOK, rep, err)
}

func (g *Gateway) runDescribe(w http.ResponseWriter, r *http.Request) {
	rep, err := g.cfg.API.DescribeRun(r.Context(), r.PathValue("id"))
	g.reply(w, r, http.StatusOK, rep, err)
}

// listRequest reads the filters of GET /v1/runs from the query string.
func listRequest(r *http.Request) (*bus.RunsListRequest, *httpError) {
	q := r.URL.Query()
	for k := range q {
		if !slices.Contains(listParams, k) {
			return nil, invalidRequest(http.StatusBadRequest, fmt.Sprintf("unknown query parameter %q", k),
				"use the parameters "+strings.Join(listParams, ", "))
		}
	}
	for _, k := range listParams {
		if k != "status" && len(q[k]) > 1 {
			return nil, invalidRequest(http.StatusBadRequest, fmt.Sprintf("query parameter %q is given %d times", k, len(q[k])),
				"give it once; only status may repeat")
		}
	}
	req := &bus.RunsListRequest{Agent: q.Get("agent"), Status: q["status"], Session: q.Get("session"), Worker: q.Get("worker"),
		Parent: q.Get("parent"), Schedule: q.Get("schedule"), Cursor: q.Get("cursor")}
	for _, t := range []struct {
		name string
		dst  *time.Time
	}{{"since", &req.Since}, {"until", &req.Until}} {
		v := q.Get(t.name)
		if v == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return nil, invalidRequest(http.StatusBadRequest, fmt.Sprintf("%s=%q is not an RFC 3339 time", t.name, v),
				"give a time such as 2026-12-01T09:00:00Z")
		}
		*t.dst = at
	}
	if v := q.Get("awaiting"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, invalidRequest(http.StatusBadRequest, fmt.Sprintf("awaiting=%q is not a boolean", v), "give awaiting=true, or leave it out")
		}
		req.Awaiting = b
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, invalidRequest(http.StatusBadRequest, fmt.Sprintf("limit=%q is not a number", v),
				fmt.Sprintf("give 1 to %d (default %d)", bus.MaxListLimit, bus.DefaultListLimit))
		}
		req.Limit = n
	}
	return req, nil
}
