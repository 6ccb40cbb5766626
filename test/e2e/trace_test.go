package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/otlptest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// tracedAgents: three tool calls around a long sleep, during which the
// first worker is killed.
const tracedAgents = `agents:
  - name: traced
    model: scripted
    tools: [append_file, sleep]
    script:
      - call: {name: append_file, args: {path: log.txt, line: "a"}, id: a}
      - call: {name: sleep, args: {ms: 10000}, id: s1}
      - call: {name: append_file, args: {path: log.txt, line: "b"}, id: b}
      - call: {name: append_file, args: {path: log.txt, line: "c"}, id: c}
      - text: done
`

// startTraced starts `lovia ARGS` with the OTEL_* environment pointing at
// rec (spans sent every 100 ms unless env says otherwise), as instance id.
func startTraced(t *testing.T, rec *otlptest.Receiver, id string, env []string, args ...string) *proc {
	t.Helper()
	return startLovia(t, id, append([]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + rec.URL,
		"OTEL_BSP_SCHEDULE_DELAY=100",
		"OTEL_RESOURCE_ATTRIBUTES=service.instance.id=" + id,
	}, env...), args...)
}

var gatewayURL = regexp.MustCompile(`lovia gateway on (http://\S+)`)

// TestTraceAcrossKill (issue 14, traces): a run submitted over HTTP to a
// `lovia gateway` process is claimed by a worker process that is killed
// with SIGKILL mid-run and resumed by another; every process exports to
// an in-process OTLP receiver. One trace holds it all: the gateway's HTTP
// span, the API's submit under it, both workers' claims under the submit
// (the redelivered request carried the same traceparent), the survivor's
// run → turn → model_call / tool_call down to the run's last tool call,
// and the victim's spans exported before the kill. Every event of the
// run, from either worker, carries that trace in its traceparent header.
func TestTraceAcrossKill(t *testing.T) {
	srv, nc, js := startNATS(t)
	rec := otlptest.Start(t)
	ctx := context.Background()
	dir := t.TempDir()
	agents := filepath.Join(dir, "agents.yaml")
	require.NoError(t, os.WriteFile(agents, []byte(tracedAgents), 0o644))
	workspace := t.TempDir()
	workerArgs := func(id string) []string {
		return []string{"worker", "--nats", srv.ClientURL(), "--agents", agents, "--workspace", workspace, "--id", id, "--ack-wait", "30s", "--log-level", "debug"}
	}

	gw := startTraced(t, rec, "gateway", nil, "gateway", "--nats", srv.ClientURL(), "--http", "127.0.0.1:0")
	var base string
	require.Eventually(t, func() bool {
		m := gatewayURL.FindStringSubmatch(gw.output())
		if m != nil {
			base = m[1]
		}
		return m != nil
	}, 30*time.Second, 20*time.Millisecond, "waiting for the gateway to listen")
	victim := startTraced(t, rec, "victim", nil, workerArgs("victim")...)
	require.Eventually(t, func() bool { return strings.Contains(victim.output(), "serving agents") },
		30*time.Second, 20*time.Millisecond, "waiting for the victim to serve")

	resp, err := http.Post(base+"/v1/runs", "application/json", strings.NewReader(`{"agent":"traced","input":"go"}`))
	require.NoError(t, err)
	runID := resp.Header.Get("Lovia-Run-Id")
	_ = resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	require.NotEmpty(t, runID)

	// The HTTP span names the trace.
	httpSpan := rec.WaitFor(t, "POST /v1/runs from the gateway", 30*time.Second, func(s otlptest.Span) bool {
		return s.Name == "POST /v1/runs" && s.Service == "lovia-gateway"
	})
	trace := httpSpan.TraceID
	inTrace := func(name, instance string) func(otlptest.Span) bool {
		return func(s otlptest.Span) bool {
			return s.TraceID == trace && s.Name == name && s.Resource["service.instance.id"] == instance
		}
	}
	// The victim ran the first call and sleeps in the second; its spans
	// so far are exported before it is killed.
	rec.WaitFor(t, "the victim's tool_call a", 30*time.Second, func(s otlptest.Span) bool {
		return inTrace("tool_call", "victim")(s) && s.Attrs["lovia.call_id"] == "a"
	})
	survivor := startTraced(t, rec, "survivor", nil, workerArgs("survivor")...)
	require.Eventually(t, func() bool { return strings.Contains(survivor.output(), "serving agents") },
		30*time.Second, 20*time.Millisecond, "waiting for the survivor to serve")
	require.Less(t, fileLines(filepath.Join(workspace, "log.txt")), 2, "the victim went past its sleep before the kill; lengthen it")
	require.NoError(t, victim.cmd.Process.Signal(syscall.SIGKILL))
	_, _ = victim.cmd.Process.Wait()

	c, err := client.New(nc, client.Options{})
	require.NoError(t, err)
	envs := completedRun(t, c, runID, "traced run")
	resumed := false
	for _, env := range envs {
		resumed = resumed || env.Type == bus.EventRunResumed
	}
	require.True(t, resumed, "the survivor resumed the run")

	// The run's last tool call, on the survivor, in the submit's trace.
	last := rec.WaitFor(t, "the survivor's tool_call c", 30*time.Second, func(s otlptest.Span) bool {
		return inTrace("tool_call", "survivor")(s) && s.Attrs["lovia.call_id"] == "c"
	})
	rec.WaitFor(t, "the survivor's run span", 30*time.Second, inTrace("run", "survivor"))

	spans := rec.Find(func(s otlptest.Span) bool { return s.TraceID == trace })
	byID := map[string]otlptest.Span{}
	for _, s := range spans {
		byID[s.SpanID] = s
	}
	dump := otlptest.Dump(spans)
	one := func(name, instance string) otlptest.Span {
		var got []otlptest.Span
		for _, s := range spans {
			if inTrace(name, instance)(s) {
				got = append(got, s)
			}
		}
		require.Len(t, got, 1, "one %s span on %s:\n%s", name, instance, dump)
		return got[0]
	}
	parentOf := func(s otlptest.Span) otlptest.Span { return byID[s.ParentID] }

	require.Empty(t, httpSpan.ParentID, "the HTTP span is the root")
	require.Equal(t, "SPAN_KIND_SERVER", httpSpan.Kind)
	submit := one("submit", "gateway")
	require.Equal(t, httpSpan.SpanID, submit.ParentID, "submit under the HTTP span")
	require.Equal(t, runID, submit.Attrs["lovia.run_id"])
	vClaim, sClaim := one("claim", "victim"), one("claim", "survivor")
	require.Equal(t, submit.SpanID, vClaim.ParentID, "the victim's claim under the submit:\n%s", dump)
	require.Equal(t, submit.SpanID, sClaim.ParentID, "the survivor's claim, of the redelivered request, under the same submit:\n%s", dump)
	require.Equal(t, "1", vClaim.Attrs["lovia.delivery"])
	require.Equal(t, "2", sClaim.Attrs["lovia.delivery"])
	require.Equal(t, "claimed", sClaim.Attrs["lovia.claim"])

	run := one("run", "survivor")
	require.Equal(t, sClaim.SpanID, run.ParentID, "the resumed run under the survivor's claim")
	lastTurn := parentOf(last)
	require.Equal(t, "turn", lastTurn.Name, "the last tool call under its turn:\n%s", dump)
	require.Equal(t, run.SpanID, lastTurn.ParentID, "the turn under the run")
	require.Equal(t, "append_file", last.Attrs["lovia.tool"])
	models := 0
	for _, s := range spans {
		if s.Name == "model_call" && s.Resource["service.instance.id"] == "survivor" {
			models++
			require.Equal(t, "turn", parentOf(s).Name, "model calls under their turn")
		}
	}
	require.Positive(t, models)
	// The victim's first call: its turn and run never ended (the kill), so
	// only the call itself was exported, in the same trace.
	vCall := rec.Find(func(s otlptest.Span) bool {
		return inTrace("tool_call", "victim")(s) && s.Attrs["lovia.call_id"] == "a"
	})
	require.Len(t, vCall, 1)

	// Every event carries the trace of the claim that published it.
	names, _ := bus.NewNames("")
	subj, _ := names.Events(runID)
	cons, err := js.OrderedConsumer(ctx, names.EventsStream(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}})
	require.NoError(t, err)
	batch, err := cons.FetchNoWait(len(envs) + 10)
	require.NoError(t, err)
	claims := map[string]bool{}
	n := 0
	for msg := range batch.Messages() {
		n++
		tp := msg.Headers().Get(bus.HeaderTraceParent)
		parts := strings.Split(tp, "-")
		require.Len(t, parts, 4, "event %s has a traceparent: %q", msg.Headers().Get(bus.HeaderSeq), tp)
		require.Equal(t, trace, parts[1], "event %s is in the submit's trace", msg.Headers().Get(bus.HeaderSeq))
		claims[parts[2]] = true
	}
	require.Equal(t, len(envs), n)
	require.True(t, claims[vClaim.SpanID] && claims[sClaim.SpanID], "events of both claims: %v", claims)
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)
}

// TestTracesFlushedAtStop: spans still buffered when a worker process is
// stopped (SIGTERM) are exported by its shutdown, not lost: the batch
// processor here would wait ten minutes to send them.
func TestTracesFlushedAtStop(t *testing.T) {
	srv, nc, _ := startNATS(t)
	rec := otlptest.Start(t)
	dir := t.TempDir()
	agents := filepath.Join(dir, "agents.yaml")
	require.NoError(t, os.WriteFile(agents, []byte(`agents:
  - name: quick
    model: scripted
    tools: [append_file]
    script:
      - call: {name: append_file, args: {path: log.txt, line: "x"}, id: x}
      - text: done
`), 0o644))
	w := startTraced(t, rec, "w", []string{"OTEL_BSP_SCHEDULE_DELAY=600000"}, // ten minutes
		"worker", "--nats", srv.ClientURL(), "--agents", agents, "--workspace", t.TempDir(), "--id", "w")
	require.Eventually(t, func() bool { return strings.Contains(w.output(), "serving agents") },
		30*time.Second, 20*time.Millisecond, "waiting for the worker to serve")
	c, err := client.New(nc, client.Options{})
	require.NoError(t, err)
	rep, err := c.Submit(context.Background(), &bus.RunRequest{Agent: "quick", Input: bus.TextInput("go")})
	require.NoError(t, err)
	completedRun(t, c, rep.RunID, "quick run")
	require.NoError(t, w.cmd.Process.Signal(syscall.SIGTERM))
	_, _ = w.cmd.Process.Wait()
	runs := rec.Find(func(s otlptest.Span) bool { return s.Name == "run" && s.Attrs["lovia.run_id"] == rep.RunID })
	require.Len(t, runs, 1, "the run's span was exported by the time the worker exited:\n%s", otlptest.Dump(rec.Spans()))
}
