package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// fleetAgents is the agents file of most tests: scripted models, so every
// run is deterministic and needs no network.
const fleetAgents = `
agents:
  - name: calc
    model: scripted
    tools: [echo]
    script:
      - call: {name: echo, args: {text: "84"}, id: c1}
      - text: The answer is 84.
  - name: quick
    model: scripted
    script:
      - text: ok
  - name: gated
    model: scripted
    tools: [echo]
    approval: [echo]
    script:
      - call: {name: echo, args: {text: "ship it"}, id: c1}
      - text: done
  - name: gated_fast
    model: scripted
    tools: [echo]
    approval: [echo]
    approval_timeout: 300ms
    script:
      - call: {name: echo, args: {text: "ship it"}, id: c1}
      - text: done
  - name: sleeper
    model: scripted
    tools: [sleep]
    script:
      - call: {name: sleep, args: {ms: 60000}, id: s1}
      - text: woke up
  - name: napper
    model: scripted
    tools: [sleep]
    script:
      - call: {name: sleep, args: {ms: 1500}, id: s1}
      - text: rested
  - name: dozer
    model: scripted
    tools: [sleep]
    script:
      - call: {name: sleep, args: {ms: 2500}, id: s1}
      - text: rested
`

// stored is one event message as the EVENTS stream holds it.
type stored struct {
	Subject string
	Header  nats.Header
	Env     *bus.Envelope
}

// readStored reads every stored event message on subjects matching filter
// (a run's subject, or lovia.events.> for all), in stream order, through
// one ordered consumer. Unlike a Tail it never skips a gap, so it shows
// exactly what a reader of the stream would see.
func readStored(t testing.TB, f *fleettest.Fleet, filter string) []stored {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	str, err := f.JS.Stream(ctx, "LOVIA_EVENTS")
	require.NoError(t, err)
	info, err := str.Info(ctx, jetstream.WithSubjectFilter(filter))
	require.NoError(t, err)
	var total uint64
	for _, n := range info.State.Subjects {
		total += n
	}
	if total == 0 {
		return nil
	}
	cons, err := f.JS.OrderedConsumer(ctx, "LOVIA_EVENTS", jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	require.NoError(t, err)
	out := make([]stored, 0, total)
	for uint64(len(out)) < total {
		batch, err := cons.Fetch(min(int(total)-len(out), 1000), jetstream.FetchMaxWait(5*time.Second))
		require.NoError(t, err)
		n := 0
		for m := range batch.Messages() {
			n++
			env, err := bus.DecodeEnvelope(m.Headers(), m.Data())
			require.NoError(t, err, "stored event on %s", m.Subject())
			out = append(out, stored{Subject: m.Subject(), Header: m.Headers(), Env: env})
		}
		require.NoError(t, batch.Error())
		require.NotZero(t, n, "fetch returned nothing with %d of %d events read", len(out), total)
	}
	return out
}

// runEvents reads one run's stored envelopes.
func runEvents(t testing.TB, f *fleettest.Fleet, runID string) []*bus.Envelope {
	t.Helper()
	var out []*bus.Envelope
	for _, s := range readStored(t, f, "lovia.events."+runID) {
		out = append(out, s.Env)
	}
	return out
}

// checkOneSubmission asserts the invariants of one submission's events:
// seqs are 1..n without gap or repeat, the headers agree with the body,
// and exactly one terminal event ends them.
func checkOneSubmission(t testing.TB, runID string, envs []*bus.Envelope) {
	t.Helper()
	require.NotEmpty(t, envs, "run %s has no events", runID)
	terminals := 0
	for i, e := range envs {
		require.Equal(t, runID, e.RunID)
		require.EqualValues(t, i+1, e.Seq, "run %s: event %d (%s) has seq %d; types %v", runID, i, e.Type, e.Seq, fleettest.Types(envs))
		if e.IsTerminal() {
			terminals++
		}
	}
	require.Equal(t, 1, terminals, "run %s: terminal events in %v", runID, fleettest.Types(envs))
	require.True(t, envs[len(envs)-1].IsTerminal(), "run %s: the terminal event is not last: %v", runID, fleettest.Types(envs))
}

// checkOneSubmissionFrom asserts that events of one submission that does
// not start the run's subject have consecutive seqs and end with exactly
// one terminal event.
func checkOneSubmissionFrom(t testing.TB, envs []*bus.Envelope) {
	t.Helper()
	require.NotEmpty(t, envs)
	terminals := 0
	for i, e := range envs {
		require.Equal(t, envs[0].Seq+uint64(i), e.Seq, "types %v", fleettest.Types(envs))
		if e.IsTerminal() {
			terminals++
		}
	}
	require.Equal(t, 1, terminals, "types %v", fleettest.Types(envs))
	require.True(t, envs[len(envs)-1].IsTerminal())
}

// waitIdle waits until the RUNS stream is empty and no agent's consumer
// has anything pending or unacknowledged: every request was acked or
// terminated, so no worker will publish anything more.
func waitIdle(t testing.TB, f *fleettest.Fleet, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	var last string
	ok := waitFor(timeout, func() bool {
		// The stream first, one request: while it holds a request some
		// run is not over, and the agents' consumers need no look (a
		// benchmark waits here, and nine consumer infos every 10 ms were
		// load of their own on the server it measures).
		si, err := f.JS.Stream(ctx, "LOVIA_RUNS")
		if err != nil {
			last = err.Error()
			return false
		}
		if msgs := si.CachedInfo().State.Msgs; msgs != 0 {
			last = fmt.Sprintf("stream msgs %d", msgs)
			return false
		}
		agents, err := bus.AgentConsumers(ctx, f.JS, bus.Names{})
		if err != nil {
			last = err.Error()
			return false
		}
		var pending, ackPending, redelivered uint64
		for _, agent := range agents {
			info, err := agentConsumerInfo(ctx, f, agent)
			if err != nil {
				last = err.Error()
				return false
			}
			pending, ackPending, redelivered = pending+info.NumPending, ackPending+uint64(info.NumAckPending), redelivered+uint64(info.NumRedelivered)
		}
		last = fmt.Sprintf("consumers pending %d, ack pending %d, redelivered %d; stream msgs 0", pending, ackPending, redelivered)
		return pending == 0 && ackPending == 0
	})
	require.True(t, ok, "fleet not idle after %s: %s", timeout, last)
}

// agentConsumerInfo reads the info of an agent's consumer.
func agentConsumerInfo(ctx context.Context, f *fleettest.Fleet, agent string) (*jetstream.ConsumerInfo, error) {
	c, err := f.JS.Consumer(ctx, "LOVIA_RUNS", bus.AgentConsumerPrefix+agent)
	if err != nil {
		return nil, err
	}
	return c.Info(ctx)
}

// workerConfig is a worker's config for StartWorker: its own connection,
// the fleet's catalog, bound to the provisioned streams, logging to the
// test when LOVIA_TEST_LOG is set.
func workerConfig(t testing.TB, f *fleettest.Fleet, id string) worker.Config {
	cfg := worker.Config{Conn: f.Connect(), Catalog: f.Catalog, ID: id, SkipProvision: true}
	if os.Getenv("LOVIA_TEST_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return cfg
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitEvent follows a run's events from its first one until one of type
// typ arrives, and returns it. It is the signal tests wait on instead of
// sleeping.
func waitEvent(t testing.TB, f *fleettest.Fleet, runID string, typ loop.EventType, timeout time.Duration) *bus.Envelope {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tail, err := f.Client.Tail(ctx, runID, bus.FromStart(), bus.Follow())
	require.NoError(t, err)
	defer tail.Close(context.Background())
	var seen []string
	for {
		env, err := tail.Next(ctx)
		if err != nil {
			t.Fatalf("run %s: waiting for %s after %v: %v", runID, typ, seen, err)
		}
		seen = append(seen, string(env.Type))
		if env.Type == typ {
			return env
		}
	}
}

// publishRaw publishes a run request straight to <p>.submit.<agent> as a
// non-Go client would (JetStream publish, optional Nats-Msg-Id) and returns
// the stream sequence of the ack.
func publishRaw(t testing.TB, f *fleettest.Fleet, agent string, body []byte, hdr nats.Header) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msg := &nats.Msg{Subject: "lovia.submit." + agent, Data: body, Header: hdr}
	ack, err := f.JS.PublishMsg(ctx, msg)
	require.NoError(t, err)
	return ack.Sequence
}

// apiError asserts err is an error reply of type typ and returns it.
func apiError(t testing.TB, err error, typ string) *bus.APIError {
	t.Helper()
	require.Error(t, err)
	var ae *bus.APIError
	require.True(t, errors.As(err, &ae), "want an API error, got %T: %v", err, err)
	require.Equal(t, typ, ae.Type, "error: %v", ae)
	return ae
}

// withConfig applies set to cfg.
func withConfig(cfg worker.Config, set func(*worker.Config)) worker.Config {
	set(&cfg)
	return cfg
}
