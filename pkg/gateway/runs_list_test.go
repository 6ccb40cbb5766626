package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// listReply is GET /v1/runs's body.
type listReply struct {
	Runs       []bus.RunSummary `json:"runs"`
	NextCursor string           `json:"next_cursor"`
	Counts     map[string]int   `json:"counts"`
}

func (b *bundle) list(t *testing.T, query string) listReply {
	t.Helper()
	resp, data := b.do(t, http.MethodGet, "/v1/runs?"+query, "")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
	var rep listReply
	require.NoError(t, json.Unmarshal(data, &rep), string(data))
	return rep
}

func (b *bundle) describe(t *testing.T, runID string) bus.RunDescription {
	t.Helper()
	resp, data := b.do(t, http.MethodGet, "/v1/runs/"+runID+"/describe", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
	var d bus.RunDescription
	require.NoError(t, json.Unmarshal(data, &d), string(data))
	return d
}

// waitFor polls cond until it holds, failing after a generous deadline
// with what it waited for.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func runIDs(rs []bus.RunSummary) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.RunID)
	}
	return out
}

func TestRunsList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	// Three calc runs that complete, one of them the parent of a fourth.
	var calcs []string
	for _, id := range []string{"list-calc-1", "list-calc-2", "list-calc-3"} {
		calcs = append(calcs, b.submit(t, `{"agent": "calc", "input": "x", "run_id": "`+id+`"}`))
	}
	child := b.submit(t, `{"agent": "calc", "input": "x", "run_id": "list-child", "metadata": {"parent_run_id": "list-calc-1"}}`)
	waitFor(t, "the four calc runs to complete", func() bool {
		return b.list(t, "agent=calc&status=completed").Counts["completed"] == 4
	})

	t.Run("newest first, with counts over the filters but status", func(t *testing.T) {
		rep := b.list(t, "agent=calc")
		require.Equal(t, []string{child, calcs[2], calcs[1], calcs[0]}, runIDs(rep.Runs))
		require.Equal(t, map[string]int{"queued": 0, "running": 0, "parked": 0, "completed": 4, "failed": 0}, rep.Counts)
		r := rep.Runs[0]
		require.Equal(t, bus.RunState("completed"), r.Status)
		require.Equal(t, "list-calc-1", r.ParentRunID)
		require.Equal(t, 2, r.Turns)
		require.Equal(t, 1, r.Attempt)
		require.NotEmpty(t, r.Worker)
		require.False(t, r.FinishedAt.IsZero())
		require.Empty(t, b.list(t, "agent=calc&status=failed,running").Runs)
		require.Equal(t, 4, b.list(t, "agent=calc&status=failed&status=completed").Counts["completed"])
	})

	t.Run("pages by cursor", func(t *testing.T) {
		p1 := b.list(t, "agent=calc&limit=3")
		require.Len(t, p1.Runs, 3)
		require.NotEmpty(t, p1.NextCursor)
		p2 := b.list(t, "agent=calc&limit=3&cursor="+url.QueryEscape(p1.NextCursor))
		require.Equal(t, []string{calcs[0]}, runIDs(p2.Runs))
		require.Empty(t, p2.NextCursor)
	})

	t.Run("filters: parent, session, time range", func(t *testing.T) {
		require.Equal(t, []string{child}, runIDs(b.list(t, "parent=list-calc-1").Runs))
		require.Empty(t, b.list(t, "session=nobody").Runs)
		future := url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
		require.Empty(t, b.list(t, "since="+future).Runs)
		require.Len(t, b.list(t, "agent=calc&until="+future).Runs, 4)
	})

	t.Run("bad filters are refused with what to give", func(t *testing.T) {
		for _, tc := range []struct{ query, want string }{
			{"status=done", "known statuses: queued, running, parked, completed, failed"},
			{"limit=501", "give 1 to 500"},
			{"limit=ten", "is not a number"},
			{"since=yesterday", "RFC 3339"},
			{"cursor=garbage", "not a cursor"},
			{"agnet=calc", "use the parameters agent, awaiting"},
			{"awaiting=maybe", "not a boolean"},
		} {
			resp, data := b.do(t, http.MethodGet, "/v1/runs?"+tc.query, "")
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", tc.query, data)
			typ, msg, hint := apiError(t, data)
			require.Equal(t, bus.TypeInvalidRequest, typ)
			require.Contains(t, msg+" "+hint, tc.want, tc.query)
		}
	})

	t.Run("describe: status, timing, history, children", func(t *testing.T) {
		d := b.describe(t, calcs[0])
		require.Equal(t, bus.RunState("completed"), d.Status)
		require.Equal(t, []string{child}, runIDs(d.Children))
		require.NotNil(t, d.Usage)
		require.NotNil(t, d.Result)
		require.Positive(t, d.DurationMS+1) // a scripted run may take under a millisecond
		var kinds []string
		for _, s := range d.Attempts {
			kinds = append(kinds, s.Kind)
			require.False(t, s.At.IsZero(), "step %+v has no time", s)
		}
		require.Equal(t, []string{"submit", "claim", "complete"}, kinds)
		require.Equal(t, d.Worker, d.Attempts[1].Worker)
	})

	t.Run("describe of an unknown run is a 404 that says what to do", func(t *testing.T) {
		resp, data := b.do(t, http.MethodGet, "/v1/runs/no-such-run/describe", "")
		require.Equal(t, http.StatusNotFound, resp.StatusCode, string(data))
		_, msg, hint := apiError(t, data)
		require.Contains(t, msg, "no-such-run")
		require.Contains(t, hint, "lovia runs list")
	})

	t.Run("a run waiting for approval is listed as awaiting from the start of its wait", func(t *testing.T) {
		resp, sse := b.stream(t, ctx, http.MethodPost, "/v1/runs", `{"agent": "gated", "input": "go"}`)
		runID := resp.Header.Get("Lovia-Run-Id")
		sse.until(t, "approval_required")
		asked := time.Now()
		var rep listReply
		waitFor(t, "the run to be listed as awaiting", func() bool {
			rep = b.list(t, "awaiting=true")
			return len(rep.Runs) == 1
		})
		t.Logf("listed as awaiting %v after its approval_required", time.Since(asked).Round(time.Millisecond))
		aw := rep.Runs[0].Awaiting
		require.Equal(t, runID, rep.Runs[0].RunID)
		require.NotNil(t, aw)
		require.Equal(t, "approval", aw.Kind)
		require.Equal(t, "c1", aw.CallID)
		require.Equal(t, "echo", aw.Tool)
		require.True(t, aw.Deadline.After(time.Now()), "deadline %v", aw.Deadline)
		require.Equal(t, 1, rep.Counts["running"])
		d := b.describe(t, runID)
		require.NotNil(t, d.Awaiting)
		require.Equal(t, "c1", d.Awaiting.CallID)

		resp2, data := b.do(t, http.MethodPost, "/v1/runs/"+runID+"/approvals/c1", `{"decision": "approve"}`)
		require.Equal(t, http.StatusOK, resp2.StatusCode, string(data))
		sse.until(t, "run_completed")
		waitFor(t, "the awaiting list to empty after the decision", func() bool { return len(b.list(t, "awaiting=true").Runs) == 0 })
		require.Nil(t, b.describe(t, runID).Awaiting)
	})

	t.Run("the same listing over NATS", func(t *testing.T) {
		msg, err := b.f.Conn.Request("lovia.api.runs.list", []byte(`{"agent": "calc", "status": ["completed"], "limit": 2}`), 30*time.Second)
		require.NoError(t, err)
		var rep listReply
		require.NoError(t, json.Unmarshal(msg.Data, &rep), string(msg.Data))
		require.Equal(t, []string{child, calcs[2]}, runIDs(rep.Runs))
		require.NotEmpty(t, rep.NextCursor)

		msg, err = b.f.Conn.Request("lovia.api.runs.list", []byte(`{"agnet": "calc"}`), 30*time.Second)
		require.NoError(t, err)
		require.Contains(t, string(msg.Data), "unknown field; known fields: agent, awaiting")

		msg, err = b.f.Conn.Request("lovia.api.run."+calcs[0]+".describe", nil, 30*time.Second)
		require.NoError(t, err)
		var d bus.RunDescription
		require.NoError(t, json.Unmarshal(msg.Data, &d), string(msg.Data))
		require.Equal(t, []string{child}, runIDs(d.Children))
		require.True(t, strings.HasPrefix(d.Attempts[0].Kind, "submit"))
	})
}
