package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// The session routes beyond GET /v1/sessions/{id} and its rewind.
const (
	routeSessionsList  = "GET /v1/sessions"
	routeSessionExport = "GET /v1/sessions/{id}/export"
	routeSessionDelete = "DELETE /v1/sessions/{id}"
	routeSessionTrim   = "POST /v1/sessions/{id}/trim"
)

func (g *Gateway) sessionRoutes() map[string]http.HandlerFunc {
	return map[string]http.HandlerFunc{routeSessionsList: g.sessionsList, routeSessionExport: g.sessionExport,
		routeSessionDelete: g.sessionDelete, routeSessionTrim: g.sessionTrim}
}

func isSessionRoute(pattern string) bool {
	switch pattern {
	case routeSessionsList, routeSessionExport, routeSessionDelete, routeSessionTrim:
		return true
	}
	return false
}

// sessionsListParams are the query parameters of GET /v1/sessions.
var sessionsListParams = []string{"agent", "cursor", "limit"}

// sessionsList handles GET /v1/sessions?agent=&limit=&cursor=.
func (g *Gateway) sessionsList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		if !slices.Contains(sessionsListParams, k) {
			g.fail(w, r, invalidRequest(http.StatusBadRequest, fmt.Sprintf("unknown query parameter %q", k),
				"use the parameters "+strings.Join(sessionsListParams, ", ")))
			return
		}
	}
	req := &bus.SessionsListRequest{Agent: q.Get("agent"), Cursor: q.Get("cursor")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			g.fail(w, r, invalidRequest(http.StatusBadRequest, fmt.Sprintf("limit=%q is not a number", v),
				fmt.Sprintf("give 1 to %d (default %d)", bus.MaxListLimit, bus.DefaultListLimit)))
			return
		}
		req.Limit = n
	}
	rep, err := g.cfg.API.ListSessions(r.Context(), req)
	g.reply(w, r, http.StatusOK, rep, err)
}

// sessionExport handles GET /v1/sessions/{id}/export: the session's
// entries as JSON lines ({run_id, entry}), in order.
func (g *Gateway) sessionExport(w http.ResponseWriter, r *http.Request) {
	rep, err := g.cfg.API.ExportSession(r.Context(), r.PathValue("id"))
	if err != nil {
		g.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Disposition", `attachment; filename="session-`+rep.SessionID+`.jsonl"`)
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	for i := range rep.Lines {
		if err := enc.Encode(&rep.Lines[i]); err != nil {
			return
		}
	}
}

// sessionDelete handles DELETE /v1/sessions/{id}.
func (g *Gateway) sessionDelete(w http.ResponseWriter, r *http.Request) {
	rep, err := g.cfg.API.DeleteSession(r.Context(), r.PathValue("id"))
	g.reply(w, r, http.StatusOK, rep, err)
}

// sessionTrim handles POST /v1/sessions/{id}/trim with {keep_chars,
// keep_runs}; both are required.
func (g *Gateway) sessionTrim(w http.ResponseWriter, r *http.Request) {
	var body struct {
		KeepChars *int `json:"keep_chars"`
		KeepRuns  *int `json:"keep_runs"`
	}
	if herr := g.decode(w, r, &body, "trim request", `{"keep_chars": 200, "keep_runs": 2}`); herr != nil {
		g.fail(w, r, herr)
		return
	}
	if body.KeepChars == nil || body.KeepRuns == nil {
		g.fail(w, r, &bus.FieldError{Field: "keep_chars", Reason: "and keep_runs are required, e.g. {\"keep_chars\": 200, \"keep_runs\": 2}"})
		return
	}
	rep, err := g.cfg.API.TrimSession(r.Context(), r.PathValue("id"), &bus.SessionTrimRequest{KeepChars: *body.KeepChars, KeepRuns: *body.KeepRuns})
	g.reply(w, r, http.StatusOK, rep, err)
}
