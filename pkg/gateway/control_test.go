package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/gateway"
	"github.com/lovia-fleet/lovia/pkg/service"
)

func TestControl(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	t.Run("ApprovalCompletesWithTheToolOutput", func(t *testing.T) {
		t.Parallel()
		resp, sse := b.stream(t, ctx, http.MethodPost, "/v1/runs", `{"agent": "gated", "input": "go"}`)
		runID := resp.Header.Get("Lovia-Run-Id")
		evs := sse.until(t, "approval_required")
		call := evs[len(evs)-1].envelope(t).Data["call"].(map[string]any)
		require.Equal(t, "c1", call["id"])

		// The call id comes from the path; a different one in the body is refused.
		resp2, data := b.do(t, http.MethodPost, "/v1/runs/"+runID+"/approvals/c1", `{"call_id": "c2", "decision": "approve"}`)
		require.Equal(t, http.StatusBadRequest, resp2.StatusCode, string(data))

		resp2, data = b.do(t, http.MethodPost, "/v1/runs/"+runID+"/approvals/c1", `{"decision": "approve", "reason": "fine"}`)
		require.Equal(t, http.StatusOK, resp2.StatusCode, string(data))
		var rep struct {
			CallID   string `json:"call_id"`
			Decision string `json:"decision"`
			Accepted bool   `json:"accepted"`
		}
		require.NoError(t, json.Unmarshal(data, &rep))
		require.Equal(t, "c1", rep.CallID)
		require.Equal(t, "approve", rep.Decision)
		require.True(t, rep.Accepted)

		rest := sse.events()
		byType := map[string]envelope{}
		for _, ev := range rest {
			byType[ev.Event] = ev.envelope(t)
		}
		require.Equal(t, "approve", byType["approval_resolved"].Data["decision"])
		require.Equal(t, "approved output", byType["tool_call_completed"].Data["output"])
		require.Equal(t, "run_completed", rest[len(rest)-1].Event)
		require.Equal(t, "done", byType["run_completed"].Data["output"])
	})

	t.Run("CancelFailsASleepingRun", func(t *testing.T) {
		t.Parallel()
		resp, sse := b.stream(t, ctx, http.MethodPost, "/v1/runs", `{"agent": "sleeper", "input": "sleep"}`)
		runID := resp.Header.Get("Lovia-Run-Id")
		sse.until(t, "tool_call_started")

		resp2, data := b.do(t, http.MethodPost, "/v1/runs/"+runID+"/cancel", `{"reason": "enough"}`)
		require.Equal(t, http.StatusOK, resp2.StatusCode, string(data))
		require.JSONEq(t, `{"run_id": "`+runID+`", "cancelled": true, "status": "running"}`, string(data))

		evs := sse.events()
		last := evs[len(evs)-1]
		require.Equal(t, "run_failed", last.Event)
		require.Equal(t, "RunCancelled", last.envelope(t).Data["error"].(map[string]any)["type"])

		require.Eventually(t, func() bool {
			_, data := b.do(t, http.MethodGet, "/v1/runs/"+runID, "")
			var st bus.StatusReply
			require.NoError(t, json.Unmarshal(data, &st))
			return st.Status == bus.StateFailed
		}, 5*time.Second, 20*time.Millisecond)

		// A finished run cannot be cancelled again, and says so.
		_, data = b.do(t, http.MethodPost, "/v1/runs/"+runID+"/cancel", "")
		require.JSONEq(t, `{"run_id": "`+runID+`", "cancelled": false, "status": "failed"}`, string(data))
	})

	t.Run("MessagesInjectAndWithdraw", func(t *testing.T) {
		t.Parallel()
		resp, sse := b.stream(t, ctx, http.MethodPost, "/v1/runs", `{"agent": "napper", "input": "rest"}`)
		runID := resp.Header.Get("Lovia-Run-Id")
		sse.until(t, "tool_call_started")

		token := func(content string) string {
			resp, data := b.do(t, http.MethodPost, "/v1/runs/"+runID+"/messages", `{"content": "`+content+`"}`)
			require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
			var rep bus.InjectReply
			require.NoError(t, json.Unmarshal(data, &rep))
			require.NotEmpty(t, rep.Token)
			return rep.Token
		}
		token("also this")
		second := token("never mind")
		resp2, data := b.do(t, http.MethodDelete, "/v1/runs/"+runID+"/messages/"+second, "")
		require.Equal(t, http.StatusOK, resp2.StatusCode, string(data))
		require.JSONEq(t, `{"removed": true}`, string(data))

		resp2, data = b.do(t, http.MethodPost, "/v1/runs/"+runID+"/messages", `{}`)
		require.Equal(t, http.StatusBadRequest, resp2.StatusCode)
		_, msg, _ := apiError(t, data)
		require.Contains(t, msg, "content")

		var injected []string
		evs := sse.events()
		for _, ev := range evs {
			if ev.Event == "user_message_injected" {
				injected = append(injected, ev.envelope(t).Data["content"].(string))
			}
		}
		require.Equal(t, []string{"also this"}, injected)
		require.Equal(t, "run_completed", evs[len(evs)-1].Event)
	})

	t.Run("SessionAndRewind", func(t *testing.T) {
		t.Parallel()
		_, sse := b.stream(t, ctx, http.MethodPost, "/v1/runs", `{"agent": "calc", "input": "What is 12*7?", "session_id": "s-1"}`)
		sse.until(t, "run_completed")

		var sess bus.SessionReply
		require.Eventually(t, func() bool {
			resp, data := b.do(t, http.MethodGet, "/v1/sessions/s-1", "")
			if resp.StatusCode == http.StatusNotFound {
				return false // the segment is appended after the run's end
			}
			require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
			require.NoError(t, json.Unmarshal(data, &sess))
			return len(sess.Segments) == 1
		}, 5*time.Second, 20*time.Millisecond)
		entries := len(sess.Segments[0].Entries)
		require.Greater(t, entries, 1)

		resp, data := b.do(t, http.MethodPost, "/v1/sessions/s-1/rewind", `{}`)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "a rewind without keep_entries must not empty the session")
		_, msg, _ := apiError(t, data)
		require.Contains(t, msg, "keep_entries")

		resp, data = b.do(t, http.MethodPost, "/v1/sessions/s-1/rewind", `{"keep_entries": 1}`)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
		require.JSONEq(t, `{"removed": `+itoa(entries-1)+`}`, string(data))

		// A session no run has completed in is not found (issue 25, item 10).
		resp, data = b.do(t, http.MethodGet, "/v1/sessions/nosuch", "")
		require.Equal(t, http.StatusNotFound, resp.StatusCode, string(data))
		typ, msg, hint := apiError(t, data)
		require.Equal(t, bus.TypeNotFound, typ)
		require.Equal(t, "session nosuch not found", msg)
		require.NotEmpty(t, hint)
	})

	t.Run("Agents", func(t *testing.T) {
		t.Parallel()
		resp, data := b.do(t, http.MethodGet, "/v1/agents", "")
		require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
		var rep bus.AgentsReply
		require.NoError(t, json.Unmarshal(data, &rep))
		var names []string
		for _, a := range rep.Agents {
			names = append(names, a.Name)
		}
		require.Equal(t, []string{"calc", "gated", "napper", "sleeper"}, names)
		require.Equal(t, []string{"echo"}, rep.Agents[0].Tools)
	})

	t.Run("AgentsFromTheFleet", func(t *testing.T) {
		t.Parallel()
		// A gateway without an agents file asks the fleet over NATS.
		api, err := service.NewAPI(service.Config{Conn: b.f.Conn, Store: b.f.Store})
		require.NoError(t, err)
		gw, err := gateway.New(gateway.Config{API: api, Client: b.f.Client, Conn: b.f.Conn})
		require.NoError(t, err)
		srv := httptest.NewServer(gw.Handler())
		defer srv.Close()
		resp, err := srv.Client().Get(srv.URL + "/v1/agents")
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var rep bus.AgentsReply
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&rep))
		require.Len(t, rep.Agents, 4)
		require.Equal(t, "Add the numbers you are given.", rep.Agents[0].Instructions, "the workers announce the agents' instructions")
		require.NotEmpty(t, rep.Agents[0].Schemas)
	})

	t.Run("ControlOfUnknownRunIs404", func(t *testing.T) {
		t.Parallel()
		for _, r := range []struct{ method, path, body string }{
			{"POST", "/v1/runs/ghost/cancel", ""},
			{"POST", "/v1/runs/ghost/approvals/c1", `{"decision": "reject"}`},
			{"POST", "/v1/runs/ghost/messages", `{"content": "hi"}`},
			{"DELETE", "/v1/runs/ghost/messages/t1", ""},
		} {
			resp, data := b.do(t, r.method, r.path, r.body)
			require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s %s: %s", r.method, r.path, data)
		}
	})
}
