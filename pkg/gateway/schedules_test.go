package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/schedule"
	"github.com/lovia-fleet/lovia/pkg/service"
)

// TestScheduleRoutes: /v1/schedules adds, lists, pauses, resumes and
// removes schedules; a schedule's fire is an ordinary run, readable at
// /v1/runs/{id}; bad input gets 400 with a hint, a missing schedule 404.
func TestScheduleRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp, data := b.do(t, http.MethodPost, "/v1/schedules", `{"name":"tick","agent":"calc","input":"what is 42*2?","every":"1s"}`)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(data))

	// The fire, as the schedules stream keeps it, names the run.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := b.f.JS.Stream(ctx, "LOVIA_SCHEDULES")
	require.NoError(t, err)
	var runID string
	require.Eventually(t, func() bool {
		m, err := st.GetLastMsgForSubject(ctx, "lovia.fire.calc")
		if err != nil {
			return false
		}
		runID = bus.ScheduledRunID(m.Header)
		return runID != ""
	}, 30*time.Second, 50*time.Millisecond, "waited for a fire of the schedule")
	require.True(t, strings.HasPrefix(runID, "sched-tick-"), runID)
	require.Eventually(t, func() bool {
		resp, data := b.do(t, http.MethodGet, "/v1/runs/"+runID, "")
		return resp.StatusCode == http.StatusOK && strings.Contains(string(data), `"status":"completed"`)
	}, 30*time.Second, 50*time.Millisecond, "waited for the scheduled run %s to complete", runID)

	resp, data = b.do(t, http.MethodPost, "/v1/schedules/tick/pause", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
	resp, data = b.do(t, http.MethodGet, "/v1/schedules", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
	var list service.ScheduleList
	require.NoError(t, json.Unmarshal(data, &list))
	require.Equal(t, []schedule.Schedule{{Name: "tick", Agent: "calc", Input: "what is 42*2?", Every: schedule.Duration(time.Second), Paused: true}}, list.Schedules)
	resp, data = b.do(t, http.MethodPost, "/v1/schedules/tick/resume", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
	resp, data = b.do(t, http.MethodGet, "/v1/schedules/tick", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
	require.Contains(t, string(data), `"every":"1s"`)
	resp, data = b.do(t, http.MethodDelete, "/v1/schedules/tick", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(data))

	resp, data = b.do(t, http.MethodGet, "/v1/schedules/tick", "")
	require.Equal(t, http.StatusNotFound, resp.StatusCode, string(data))
	_, _, hint := apiError(t, data)
	require.Contains(t, hint, "lovia schedule ls")
	for body, want := range map[string]string{
		`{"name":"x","agent":"calc","input":"hi","cron":"30 9 * * *"}`:                        "has 5 fields",
		`{"name":"x","agent":"calc","input":"hi","every":"1s","time_zone":"Europe/Paris"}`:    "only to a cron",
		`{"name":"x","agent":"calc","input":"hi","at":"2001-01-01T00:00:00Z"}`:                "not in the future",
		`{"name":"x","agent":"calc","input":"hi","every":"1s","when":"now"}`:                  "when",
		`{"name":"x","agent":"calc","input":"hi","cron":"@daily","time_zone":"Mars/Olympus"}`: "unknown time zone",
	} {
		resp, data := b.do(t, http.MethodPost, "/v1/schedules", body)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
		_, msg, hint := apiError(t, data)
		require.Contains(t, msg, want, body)
		require.NotEmpty(t, hint, body)
	}
}
