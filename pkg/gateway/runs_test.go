package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/gateway"
)

func TestSubmit(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("JSONThenStatusUntilCompleted", func(t *testing.T) {
		t.Parallel()
		resp, data := b.do(t, http.MethodPost, "/v1/runs", `{"agent": "calc", "input": "What is 12*7?"}`)
		require.Equal(t, http.StatusAccepted, resp.StatusCode, string(data))
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		var rep bus.SubmitReply
		require.NoError(t, json.Unmarshal(data, &rep))
		require.Equal(t, bus.StateQueued, rep.Status)
		require.Equal(t, "calc", rep.Agent)
		require.Equal(t, "lovia.events."+rep.RunID, rep.EventsSubject)
		require.Equal(t, "/v1/runs/"+rep.RunID, resp.Header.Get("Location"))
		require.Equal(t, rep.RunID, resp.Header.Get("Lovia-Run-Id"))

		var st bus.StatusReply
		require.Eventually(t, func() bool {
			resp, data := b.do(t, http.MethodGet, "/v1/runs/"+rep.RunID, "")
			require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
			require.NoError(t, json.Unmarshal(data, &st))
			return st.Status == bus.StateCompleted
		}, 10*time.Second, 20*time.Millisecond)
		require.Equal(t, "The answer is 84.", st.Result.Output)
		require.Equal(t, "calc", st.Agent)

		// The completed run submitted again is replayed: 200, nothing new runs.
		resp, data = b.do(t, http.MethodPost, "/v1/runs", `{"run_id": "`+rep.RunID+`", "agent": "calc", "input": "again"}`)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
		var again bus.SubmitReply
		require.NoError(t, json.Unmarshal(data, &again))
		require.True(t, again.Replayed)
		require.Equal(t, "The answer is 84.", again.Result.Output)
	})

	t.Run("MsgpackBodyJSONReplyAndEvents", func(t *testing.T) {
		t.Parallel()
		body, err := msgpack.Marshal(map[string]any{"agent": "calc", "input": "What is 12*7?", "run_id": "mp-1"})
		require.NoError(t, err)
		req, err := http.NewRequest(http.MethodPost, b.url+"/v1/runs", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/msgpack")
		resp, err := b.http.Do(req)
		require.NoError(t, err)
		var rep bus.SubmitReply
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&rep))
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusAccepted, resp.StatusCode)
		require.Equal(t, "mp-1", rep.RunID)

		// The run's events are stored as msgpack; the stream shows JSON.
		envs := b.f.Events("mp-1", 10*time.Second)
		require.Equal(t, bus.Msgpack, envs[0].Encoding)
		_, sse := b.stream(t, context.Background(), http.MethodGet, "/v1/runs/mp-1/events", "")
		evs := sse.events()
		require.Equal(t, calcTypes, types(evs))
		last := evs[len(evs)-1].envelope(t)
		require.Equal(t, "The answer is 84.", last.Data["output"])
	})

	t.Run("AcceptEventStreamStreamsTheRun", func(t *testing.T) {
		t.Parallel()
		resp, sse := b.stream(t, context.Background(), http.MethodPost, "/v1/runs", `{"agent": "calc", "input": "What is 12*7?"}`)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
		runID := resp.Header.Get("Lovia-Run-Id")
		require.NotEmpty(t, runID)
		evs := sse.events()
		require.Equal(t, calcTypes, types(evs))
		require.Equal(t, seqIDs(1, len(calcTypes)), ids(evs))
		for i, ev := range evs {
			env := ev.envelope(t)
			require.Equal(t, runID, env.RunID)
			require.EqualValues(t, i+1, env.Seq)
			require.Equal(t, ev.Event, env.Type)
			require.Equal(t, "calc", env.Agent)
			_, err := time.Parse(time.RFC3339Nano, env.Time)
			require.NoError(t, err)
		}
		require.Equal(t, "The answer is 84.", evs[len(evs)-1].envelope(t).Data["output"])

		// Streaming the completed run's submit again replays its events.
		_, sse = b.stream(t, context.Background(), http.MethodPost, "/v1/runs", `{"run_id": "`+runID+`", "agent": "calc", "input": "x"}`)
		require.Equal(t, calcTypes, types(sse.events()))
	})

	t.Run("UnknownAgentIs404", func(t *testing.T) {
		t.Parallel()
		resp, data := b.do(t, http.MethodPost, "/v1/runs", `{"agent": "nobody", "input": "hi"}`)
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
		typ, _, hint := apiError(t, data)
		require.Equal(t, "UnknownAgent", typ)
		require.Contains(t, hint, "calc")
	})

	t.Run("UnknownRunIs404", func(t *testing.T) {
		t.Parallel()
		resp, data := b.do(t, http.MethodGet, "/v1/runs/no-such-run", "")
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
		typ, msg, _ := apiError(t, data)
		require.Equal(t, "NotFound", typ)
		require.Contains(t, msg, "no-such-run")
	})
}

// curl -d sends application/x-www-form-urlencoded by default: a JSON body
// under that type is accepted as JSON.
func TestCurlDefaultContentType(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp := b.open(t, context.Background(), "POST", "/v1/runs", `{"agent": "calc", "input": "hi"}`, "Content-Type", "application/x-www-form-urlencoded")
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, 202, resp.StatusCode, string(data))
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *gateway.Config) { c.MaxBodyBytes = 1024 })

	for _, tc := range []struct {
		name, method, path, body, contentType string
		status                                int
		typ, message                          string
	}{
		{"MalformedJSON", "POST", "/v1/runs", `{"agent": "calc", "input": `, "application/json", 400, "InvalidRequest", "invalid JSON at byte"},
		{"WrongFieldType", "POST", "/v1/runs", `{"agent": "calc", "input": "x", "max_turns": "ten"}`, "application/json", 400, "InvalidRequest", "max_turns: got a JSON string, want an integer"},
		{"BadInput", "POST", "/v1/runs", `{"agent": "calc", "input": 7}`, "application/json", 400, "InvalidRequest", "want a string or a list"},
		{"InvalidField", "POST", "/v1/runs", `{"agent": "calc", "input": "x", "if_run_exists": "maybe"}`, "application/json", 400, "InvalidRequest", "if_run_exists"},
		{"MissingAgent", "POST", "/v1/runs", `{"input": "x"}`, "application/json", 400, "InvalidRequest", "agent: is required"},
		{"EmptyBody", "POST", "/v1/runs", ``, "none", 400, "InvalidRequest", "empty"},
		{"NotAnObject", "POST", "/v1/runs", `hello`, "none", 400, "InvalidRequest", "neither a JSON object nor a msgpack map"},
		{"OtherContentType", "POST", "/v1/runs", `agent=calc`, "application/x-www-form-urlencoded", 415, "InvalidRequest", "not supported"},
		{"Oversized", "POST", "/v1/runs", `{"agent": "calc", "input": "` + strings.Repeat("x", 2048) + `"}`, "application/json", 413, "InvalidRequest", "1024-byte limit"},
		{"BadRunID", "GET", "/v1/runs/bad%20id", ``, "", 400, "InvalidRequest", "run_id"},
		{"BadDecision", "POST", "/v1/runs/r1/approvals/c1", `{"approve": true}`, "application/json", 400, "InvalidRequest", "decision"},
		{"WrongMethod", "DELETE", "/v1/runs", ``, "", 405, "MethodNotAllowed", "DELETE is not allowed"},
		{"NoRoute", "GET", "/v2/nothing", ``, "", 404, "NotFound", "no route"},
		{"EventsOfUnknownRun", "GET", "/v1/runs/r1/events", ``, "", 404, "NotFound", "r1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var header []string
			switch tc.contentType {
			case "none":
				header = []string{"Content-Type", ""}
			case "":
			default:
				header = []string{"Content-Type", tc.contentType}
			}
			resp := b.open(t, context.Background(), tc.method, tc.path, tc.body, header...)
			defer resp.Body.Close()
			data, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, tc.status, resp.StatusCode, string(data))
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			typ, msg, hint := apiError(t, data)
			require.Equal(t, tc.typ, typ)
			require.Contains(t, msg, tc.message)
			if tc.name != "BadRunID" { // the message says what a run id is
				require.NotEmpty(t, hint, "an error reply says what to do")
			}
		})
	}

	t.Run("405ListsTheAllowedMethods", func(t *testing.T) {
		t.Parallel()
		resp, _ := b.do(t, http.MethodPut, "/v1/runs/r1", "")
		require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
		require.Contains(t, resp.Header.Get("Allow"), "GET")
	})
}
