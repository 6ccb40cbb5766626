package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/gateway"
)

func TestEvents(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *gateway.Config) { c.Heartbeat = 50 * time.Millisecond })
	ctx := context.Background()
	done := b.submit(t, `{"agent": "calc", "input": "What is 12*7?"}`)
	b.f.Events(done, 10*time.Second) // wait for the run to finish
	n := len(calcTypes)

	t.Run("FromStartInOrder", func(t *testing.T) {
		t.Parallel()
		resp, sse := b.stream(t, ctx, http.MethodGet, "/v1/runs/"+done+"/events", "")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
		require.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
		evs := sse.events()
		require.Equal(t, seqIDs(1, n), ids(evs))
		require.Equal(t, calcTypes, types(evs))
	})

	t.Run("ResumesAfterLastEventID", func(t *testing.T) {
		t.Parallel()
		for name, req := range map[string]struct{ query, header string }{
			"Header":         {header: "5"},
			"LastEventIDArg": {query: "?last_event_id=5"},
			"FromSeqArg":     {query: "?from_seq=6"},
			"HeaderWins":     {query: "?from_seq=2", header: "5"},
		} {
			var header []string
			if req.header != "" {
				header = []string{"Last-Event-ID", req.header}
			}
			_, sse := b.stream(t, ctx, http.MethodGet, "/v1/runs/"+done+"/events"+req.query, "", header...)
			evs := sse.events()
			require.Equal(t, seqIDs(6, n), ids(evs), name)
			require.Equal(t, calcTypes[5:], types(evs), name)
		}
	})

	t.Run("AfterTheTerminalEventIs204", func(t *testing.T) {
		t.Parallel()
		resp, data := b.do(t, http.MethodGet, "/v1/runs/"+done+"/events", "", "Last-Event-ID", itoa(n))
		require.Equal(t, http.StatusNoContent, resp.StatusCode)
		require.Empty(t, data)
	})

	t.Run("BadLastEventIDIs400", func(t *testing.T) {
		t.Parallel()
		for _, q := range []string{"?last_event_id=x", "?from_seq=0", "?from_seq=-1", "?follow=perhaps"} {
			resp, data := b.do(t, http.MethodGet, "/v1/runs/"+done+"/events"+q, "")
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, q)
			typ, _, hint := apiError(t, data)
			require.Equal(t, "InvalidRequest", typ)
			require.NotEmpty(t, hint)
		}
	})

	t.Run("ResumeMidRun", func(t *testing.T) {
		t.Parallel()
		// The acceptance test of the fleet issue: a viewer that drops out of
		// a running run and reconnects with Last-Event-ID sees every event
		// exactly once.
		runID := b.submit(t, `{"agent": "napper", "input": "rest"}`)
		sctx, cancel := context.WithCancel(ctx)
		_, sse := b.stream(t, sctx, http.MethodGet, "/v1/runs/"+runID+"/events", "")
		first := sse.until(t, "tool_call_started")
		cancel() // the viewer drops while the tool sleeps

		last := first[len(first)-1].ID
		_, sse = b.stream(t, ctx, http.MethodGet, "/v1/runs/"+runID+"/events", "", "Last-Event-ID", last)
		rest := sse.events()
		all := append(first, rest...)
		require.Equal(t, seqIDs(1, len(all)), ids(all))
		require.Equal(t, "run_completed", all[len(all)-1].Event)
		require.Equal(t, "rested", all[len(all)-1].envelope(t).Data["output"])
	})

	t.Run("Heartbeats", func(t *testing.T) {
		t.Parallel()
		runID := b.submit(t, `{"agent": "napper", "input": "rest"}`)
		_, sse := b.stream(t, ctx, http.MethodGet, "/v1/runs/"+runID+"/events", "")
		sse.until(t, "tool_call_started")
		ev, ok := sse.next() // the tool sleeps for 1.5s, the heartbeat is 50ms
		require.True(t, ok)
		require.Equal(t, "keep-alive", ev.Comment)
		evs := sse.events()
		require.Equal(t, "run_completed", evs[len(evs)-1].Event)
	})
}

func TestEventsClientDisconnectReleasesTheTail(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	runID := b.submit(t, `{"agent": "sleeper", "input": "sleep"}`)
	sctx, cancel := context.WithCancel(ctx)
	_, sse := b.stream(t, sctx, http.MethodGet, "/v1/runs/"+runID+"/events", "")
	sse.until(t, "tool_call_started")
	require.Equal(t, 1, consumers(t, b))
	require.Contains(t, scrape(t, b), "lovia_gateway_sse_streams 1")

	cancel()
	require.Eventually(t, func() bool { return consumers(t, b) == 0 }, 5*time.Second, 10*time.Millisecond,
		"the tail's consumer outlived its client")
	require.Eventually(t, func() bool { return strings.Contains(scrape(t, b), "lovia_gateway_sse_streams 0") }, 5*time.Second, 10*time.Millisecond)
}

func TestStopEndsStreams(t *testing.T) {
	t.Parallel()
	b := setup(t)
	runID := b.submit(t, `{"agent": "sleeper", "input": "sleep"}`)
	_, sse := b.stream(t, context.Background(), http.MethodGet, "/v1/runs/"+runID+"/events", "")
	sse.until(t, "tool_call_started")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, b.gw.Stop(ctx))
	require.Less(t, time.Since(start), 2*time.Second, "Stop waited for an SSE stream")
	_, ok := sse.next()
	require.False(t, ok, "the stream goes on after Stop")
	require.Eventually(t, func() bool { return consumers(t, b) == 0 }, 5*time.Second, 10*time.Millisecond)
}

// consumers counts the consumers of the events stream (one per open tail).
func consumers(t *testing.T, b *bundle) int {
	t.Helper()
	s, err := b.f.JS.Stream(context.Background(), b.f.Client.Names().EventsStream())
	require.NoError(t, err)
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	return info.State.Consumers
}

// scrape returns the gateway's /metrics.
func scrape(t *testing.T, b *bundle) string {
	t.Helper()
	resp, data := b.do(t, http.MethodGet, "/metrics", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return string(data)
}
