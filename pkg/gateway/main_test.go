package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/internal/leaktest"
	"github.com/lovia-fleet/lovia/pkg/gateway"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

func TestMain(m *testing.M) {
	leaktest.VerifyTestMain(m)
}

// agents are the scripted agents of the tests.
const agents = `
agents:
  - name: calc
    instructions: Add the numbers you are given.
    model: scripted
    tools: [echo]
    script:
      - call: {name: echo, args: {text: "84"}, id: c1}
      - text: The answer is 84.
  - name: gated
    model: scripted
    tools: [echo]
    approval: [echo]
    script:
      - call: {name: echo, args: {text: approved output}, id: c1}
      - text: done
  - name: sleeper
    model: scripted
    tools: [sleep]
    script:
      - call: {name: sleep, args: {ms: 60000}, id: c1}
      - text: woke up
  - name: napper
    model: scripted
    tools: [sleep]
    script:
      - call: {name: sleep, args: {ms: 1500}, id: c1}
      - text: rested
`

// calcTypes are the event types of a calc run.
var calcTypes = []string{"run_started", "turn_started", "message_completed", "tool_call_started", "tool_call_completed", "turn_ended",
	"turn_started", "text_delta", "text_delta", "text_delta", "text_delta", "message_completed", "turn_ended", "run_completed"}

type bundle struct {
	f       *fleettest.Fleet
	gw      *gateway.Gateway
	url     string
	metrics *prometheus.Registry
	http    *http.Client
}

// setup starts a fleet with the test agents and a gateway on a free port,
// both stopped at cleanup. cfg, when given, adjusts the gateway's config.
func setup(t *testing.T, cfg ...func(*gateway.Config)) *bundle {
	t.Helper()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: agents, Worker: func(c *worker.Config) {
		c.ShutdownGrace = 100 * time.Millisecond // runs asleep at cleanup are cut short
	}})
	b := &bundle{f: f, metrics: prometheus.NewRegistry()}
	c := gateway.Config{API: f.API, Client: f.Client, Conn: f.Conn, Addr: "127.0.0.1:0", Metrics: b.metrics}
	for _, fn := range cfg {
		fn(&c)
	}
	gw, err := gateway.New(c)
	require.NoError(t, err)
	require.NoError(t, gw.Start(context.Background()))
	b.gw, b.url = gw, "http://"+gw.Addr()
	tr := &http.Transport{}
	b.http = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, gw.Stop(ctx))
		tr.CloseIdleConnections()
	})
	return b
}

// do sends a request and returns the response with its body read.
func (b *bundle) do(t *testing.T, method, path, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	resp := b.open(t, context.Background(), method, path, body, header...)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, data
}

// open sends a request and returns the response unread.
func (b *bundle) open(t *testing.T, ctx context.Context, method, path, body string, header ...string) *http.Response {
	t.Helper()
	resp, err := b.http.Do(newRequest(t, ctx, method, b.url+path, body, header...))
	require.NoError(t, err)
	return resp
}

// newRequest builds a request to url: a non-empty body is JSON; header
// is name, value pairs (an empty value removes the header).
func newRequest(t *testing.T, ctx context.Context, method, url, body string, header ...string) *http.Request {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	return req
}

// submit posts a run request and returns the run id.
func (b *bundle) submit(t *testing.T, body string) string {
	t.Helper()
	resp, data := b.do(t, http.MethodPost, "/v1/runs", body)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(data))
	var rep struct {
		RunID string `json:"run_id"`
	}
	require.NoError(t, json.Unmarshal(data, &rep))
	return rep.RunID
}

// sseEvent is one event of an SSE stream, or a comment.
type sseEvent struct {
	ID, Event, Data string
	Comment         string
}

// envelope decodes the event's data as an event envelope.
func (e sseEvent) envelope(t *testing.T) envelope {
	t.Helper()
	var env envelope
	require.NoError(t, json.Unmarshal([]byte(e.Data), &env), e.Data)
	return env
}

type envelope struct {
	RunID string         `json:"run_id"`
	Seq   uint64         `json:"seq"`
	Type  string         `json:"type"`
	Time  string         `json:"time"`
	Agent string         `json:"agent"`
	Turn  int            `json:"turn"`
	Data  map[string]any `json:"data"`
}

// sseReader parses an SSE stream.
type sseReader struct{ sc *bufio.Scanner }

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	return &sseReader{sc: sc}
}

// next returns the next event or comment; ok is false at the end.
func (s *sseReader) next() (ev sseEvent, ok bool) {
	var data []string
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "":
			if ev.ID != "" || ev.Event != "" || data != nil {
				ev.Data = strings.Join(data, "\n")
				return ev, true
			}
		case strings.HasPrefix(line, ":"):
			return sseEvent{Comment: strings.TrimSpace(line[1:])}, true
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "id":
				ev.ID = value
			case "event":
				ev.Event = value
			case "data":
				data = append(data, value)
			}
		}
	}
	return sseEvent{}, false
}

// events reads the stream's events (not comments) to its end.
func (s *sseReader) events() []sseEvent {
	var out []sseEvent
	for {
		ev, ok := s.next()
		if !ok {
			return out
		}
		if ev.Comment == "" {
			out = append(out, ev)
		}
	}
}

// until reads events until one of type typ, and returns them all.
func (s *sseReader) until(t *testing.T, typ string) []sseEvent {
	t.Helper()
	var out []sseEvent
	for {
		ev, ok := s.next()
		require.True(t, ok, "the stream ended before a %s event; got %v", typ, types(out))
		if ev.Comment != "" {
			continue
		}
		out = append(out, ev)
		if ev.Event == typ {
			return out
		}
	}
}

func types(evs []sseEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Event
	}
	return out
}

func ids(evs []sseEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

// seqIDs returns the ids "from".."to".
func seqIDs(from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, itoa(i))
	}
	return out
}

func itoa(i int) string { return strconv.Itoa(i) }

// stream opens GET path as an SSE stream and returns its reader; the
// response is closed at cleanup.
func (b *bundle) stream(t *testing.T, ctx context.Context, method, path, body string, header ...string) (*http.Response, *sseReader) {
	t.Helper()
	resp := b.open(t, ctx, method, path, body, append([]string{"Accept", "text/event-stream"}, header...)...)
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp, newSSEReader(resp.Body)
}

// apiError decodes an error reply.
func apiError(t *testing.T, data []byte) (typ, msg, hint string) {
	t.Helper()
	var e struct {
		Error struct{ Type, Message, Hint string } `json:"error"`
	}
	require.NoError(t, json.Unmarshal(data, &e), string(data))
	return e.Error.Type, e.Error.Message, e.Error.Hint
}
