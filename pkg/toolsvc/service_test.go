package toolsvc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/toolsvc"
)

// setup starts an embedded NATS server with JetStream and returns a
// connection.
func setup(t *testing.T) *nats.Conn {
	t.Helper()
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir(), Port: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	nc, err := srv.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

type lineIn struct {
	Line string `json:"line"`
}

// counterTools are an add tool, a failing tool and an append tool that
// counts its runs.
func counterTools(runs *atomic.Int64, gate chan struct{}) []*loop.Tool {
	return []*loop.Tool{
		loop.NewTool("add", "Add two integers.", func(_ context.Context, _ *loop.RunContext, in addIn) (int, error) {
			return in.A + in.B, nil
		}),
		loop.NewTool("fail", "Always fails.", func(context.Context, *loop.RunContext, struct{}) (string, error) {
			return "", &loop.ToolError{Tool: "fail", Message: "the disk is full"}
		}),
		loop.NewTool("append", "Append a line.", func(ctx context.Context, _ *loop.RunContext, in lineIn) (string, error) {
			runs.Add(1)
			if gate != nil {
				select {
				case <-gate:
				case <-ctx.Done():
					return "", ctx.Err()
				}
			}
			return "appended " + in.Line, nil
		}),
	}
}

func serve(t *testing.T, cfg toolsvc.Config) *toolsvc.Service {
	t.Helper()
	s, err := toolsvc.New(cfg)
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.Stop(ctx))
	})
	return s
}

// discover waits until the service has n instances and returns it.
func discover(t *testing.T, nc *nats.Conn, name string, n int) toolsvc.ServiceInfo {
	t.Helper()
	var found toolsvc.ServiceInfo
	require.Eventually(t, func() bool {
		infos, err := toolsvc.Discover(context.Background(), nc, "lovia", 0)
		require.NoError(t, err)
		for _, si := range infos {
			if si.Name == name && si.Instances == n {
				found = si
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "waiting for %d instances of %s", n, name)
	return found
}

func callerTool(t *testing.T, nc *nats.Conn, si toolsvc.ServiceInfo, name string, callOf func(context.Context, *loop.RunContext) toolsvc.Call) *loop.Tool {
	t.Helper()
	for _, ti := range si.Tools {
		if ti.Name == name {
			tl, err := toolsvc.Tool(toolsvc.CallerConfig{Conn: nc, CallOf: callOf}, ti)
			require.NoError(t, err)
			return tl
		}
	}
	t.Fatalf("no tool %s in %+v", name, si.Tools)
	return nil
}

// request sends body with hdr to a tool's subject as a caller that is
// not a toolsvc.Caller would, and returns the reply.
func request(t *testing.T, nc *nats.Conn, subject string, hdr nats.Header, body string) *nats.Msg {
	t.Helper()
	reply, err := nc.RequestMsg(&nats.Msg{Subject: subject, Header: hdr, Data: []byte(body)}, 10*time.Second)
	require.NoError(t, err)
	return reply
}

func invoke(tl *loop.Tool, args string) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return tl.Func(ctx, nil, json.RawMessage(args))
}

func TestServeDiscoverCall(t *testing.T) {
	t.Parallel()
	nc := setup(t)
	var runs atomic.Int64
	serve(t, toolsvc.Config{Conn: nc, Name: "mathsvc", Description: "math", Tools: counterTools(&runs, nil)})
	si := discover(t, nc, "mathsvc", 1)

	t.Run("discovery lists the endpoints with description and schema", func(t *testing.T) {
		require.Equal(t, "0.0.1", si.Version)
		require.Len(t, si.Tools, 3)
		add := si.Tools[0]
		require.Equal(t, "mathsvc__add", add.Name)
		require.Equal(t, "lovia.tools.mathsvc.add", add.Subject)
		require.Equal(t, "Add two integers.", add.Description)
		require.JSONEq(t, `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]}`, string(add.Schema))
	})
	t.Run("a call answers the result", func(t *testing.T) {
		out, err := invoke(callerTool(t, nc, si, "mathsvc__add", nil), `{"a":2,"b":40}`)
		require.NoError(t, err)
		require.Equal(t, float64(42), out)
	})
	t.Run("arguments are validated before the call", func(t *testing.T) {
		before := runs.Load()
		_, err := invoke(callerTool(t, nc, si, "mathsvc__append", nil), `{"line": 7}`)
		require.ErrorIs(t, err, loop.ErrInvalidToolArgs)
		require.Equal(t, before, runs.Load())
	})
	t.Run("an error reply is an error result with the service's message", func(t *testing.T) {
		_, err := invoke(callerTool(t, nc, si, "mathsvc__fail", nil), `{}`)
		var te *loop.ToolError
		require.ErrorAs(t, err, &te)
		require.Equal(t, "the disk is full", te.Message)
	})
	t.Run("a second instance is counted", func(t *testing.T) {
		serve(t, toolsvc.Config{Conn: nc, Name: "mathsvc", Tools: counterTools(&runs, nil)})
		discover(t, nc, "mathsvc", 2)
	})
}

func TestCallErrors(t *testing.T) {
	t.Parallel()
	nc := setup(t)
	ti := toolsvc.ToolInfo{Name: "gone__tool", Service: "gone", Tool: "tool", Subject: "lovia.tools.gone.tool"}
	tl, err := toolsvc.Tool(toolsvc.CallerConfig{Conn: nc}, ti)
	require.NoError(t, err)

	t.Run("no responders", func(t *testing.T) {
		_, err := invoke(tl, `{}`)
		var te *loop.ToolError
		require.ErrorAs(t, err, &te)
		require.ErrorIs(t, err, toolsvc.ErrNoService)
		require.Contains(t, te.Message, `no instance of tool service "gone" is running`)
	})
	t.Run("a timeout", func(t *testing.T) {
		gate := make(chan struct{})
		var runs atomic.Int64
		serve(t, toolsvc.Config{Conn: nc, Name: "slow", Tools: counterTools(&runs, gate)})
		defer close(gate)
		si := discover(t, nc, "slow", 1)
		slow := callerTool(t, nc, si, "slow__append", nil)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, err := slow.Func(ctx, nil, json.RawMessage(`{"line":"x"}`))
		require.ErrorIs(t, err, toolsvc.ErrTimeout)
		require.ErrorContains(t, err, `tool service "slow" did not answer slow__append in time`)
	})
	t.Run("headers carry the run, the call and the agent", func(t *testing.T) {
		got := make(chan nats.Header, 1)
		sub, err := nc.Subscribe("lovia.tools.raw.t", func(m *nats.Msg) {
			got <- m.Header
			_ = m.Respond([]byte("ok"))
		})
		require.NoError(t, err)
		defer func() { _ = sub.Unsubscribe() }()
		raw, err := toolsvc.Tool(toolsvc.CallerConfig{Conn: nc, CallOf: func(context.Context, *loop.RunContext) toolsvc.Call {
			return toolsvc.Call{RunID: "r1", CallID: "c1", Agent: "support"}
		}}, toolsvc.ToolInfo{Name: "raw__t", Service: "raw", Tool: "t", Subject: "lovia.tools.raw.t"})
		require.NoError(t, err)
		out, err := invoke(raw, `{}`)
		require.NoError(t, err)
		require.Equal(t, "ok", out)
		h := <-got
		require.Equal(t, "r1", h.Get(toolsvc.HeaderRunID))
		require.Equal(t, "c1", h.Get(toolsvc.HeaderCallID))
		require.Equal(t, "support", h.Get(toolsvc.HeaderAgent))
	})
}

func TestDedupe(t *testing.T) {
	t.Parallel()
	nc := setup(t)
	var runs atomic.Int64
	gate := make(chan struct{})
	serve(t, toolsvc.Config{Conn: nc, Name: "files", Tools: counterTools(&runs, gate), Dedupe: &toolsvc.Dedupe{}})
	si := discover(t, nc, "files", 1)
	withCall := func(id string) *loop.Tool {
		return callerTool(t, nc, si, "files__append", func(context.Context, *loop.RunContext) toolsvc.Call {
			return toolsvc.Call{RunID: "r1", CallID: id, Agent: "a"}
		})
	}

	// Ten calls with one call id, at once, while the first runs: the tool
	// runs once and every caller gets its reply.
	var wg sync.WaitGroup
	outs := make(chan any, 10)
	for range 10 {
		wg.Go(func() {
			out, err := invoke(withCall("call-1"), `{"line":"a"}`)
			if err != nil {
				out = err
			}
			outs <- out
		})
	}
	require.Eventually(t, func() bool { return runs.Load() == 1 }, 10*time.Second, 5*time.Millisecond, "waiting for the first call to run")
	close(gate)
	wg.Wait()
	close(outs)
	for out := range outs {
		require.Equal(t, "appended a", out)
	}
	require.EqualValues(t, 1, runs.Load())

	// Later, the same id is answered from the store; another id runs.
	out, err := invoke(withCall("call-1"), `{"line":"a"}`)
	require.NoError(t, err)
	require.Equal(t, "appended a", out)
	require.EqualValues(t, 1, runs.Load())
	out, err = invoke(withCall("call-2"), `{"line":"b"}`)
	require.NoError(t, err)
	require.Equal(t, "appended b", out)
	require.EqualValues(t, 2, runs.Load())

	t.Run("a claim whose instance died is taken over after its lease", func(t *testing.T) {
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		kv, err := js.KeyValue(context.Background(), "lovia_tool_calls")
		require.NoError(t, err)
		// What an instance that died while running call-3 left behind.
		key := toolsvc.CallKey("files", "append", toolsvc.Call{RunID: "r1", CallID: "call-3"})
		_, err = kv.Create(context.Background(), key, []byte(fmt.Sprintf(`{"done":false,"args":%q,"lease":%q}`,
			toolsvc.ArgsDigest([]byte(`{"line":"c"}`)), time.Now().Add(-time.Second).Format(time.RFC3339Nano))))
		require.NoError(t, err)
		out, err := invoke(withCall("call-3"), `{"line":"c"}`)
		require.NoError(t, err)
		require.Equal(t, "appended c", out)
		require.EqualValues(t, 3, runs.Load())
	})
}

// An instance stopped during a call cancels it: the caller is told to
// call again, and the call made again runs (on another instance) instead
// of getting the cancellation as the call's stored reply.
func TestDedupeStopDuringCallRunsAgain(t *testing.T) {
	t.Parallel()
	nc := setup(t)
	var runs atomic.Int64
	s, err := toolsvc.New(toolsvc.Config{Conn: nc, Name: "stopsvc", Tools: counterTools(&runs, make(chan struct{})), Dedupe: &toolsvc.Dedupe{}})
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	si := discover(t, nc, "stopsvc", 1)
	tl := callerTool(t, nc, si, "stopsvc__append", func(context.Context, *loop.RunContext) toolsvc.Call {
		return toolsvc.Call{RunID: "r1", CallID: "c1", Agent: "a"}
	})
	first := make(chan error, 1)
	go func() { _, err := invoke(tl, `{"line":"a"}`); first <- err }()
	require.Eventually(t, func() bool { return runs.Load() == 1 }, 10*time.Second, 5*time.Millisecond, "waiting for the call to run")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	require.NoError(t, s.Stop(ctx), "a stop whose ctx ends cancels the call in flight")
	err = <-first
	require.ErrorContains(t, err, "stopped during the call")

	serve(t, toolsvc.Config{Conn: nc, Name: "stopsvc", Tools: counterTools(&runs, nil), Dedupe: &toolsvc.Dedupe{}})
	require.Eventually(t, func() bool {
		out, err := invoke(tl, `{"line":"a"}`)
		return err == nil && out == "appended a"
	}, 10*time.Second, 20*time.Millisecond, "waiting for the call made again to run on the new instance")
	require.EqualValues(t, 2, runs.Load())
}

// A reply too large to keep is answered once; the call made again is
// told it ran, and does not run a second time.
func TestDedupeReplyTooLargeToKeep(t *testing.T) {
	t.Parallel()
	nc := setup(t)
	var runs atomic.Int64
	big := loop.NewTool("big", "A large reply.", func(context.Context, *loop.RunContext, struct{}) (string, error) {
		runs.Add(1)
		return strings.Repeat("x", int(nc.MaxPayload())*3/4), nil
	})
	serve(t, toolsvc.Config{Conn: nc, Name: "bigsvc", Tools: []*loop.Tool{big}, Dedupe: &toolsvc.Dedupe{Lease: time.Second}})
	si := discover(t, nc, "bigsvc", 1)
	tl := callerTool(t, nc, si, "bigsvc__big", func(context.Context, *loop.RunContext) toolsvc.Call {
		return toolsvc.Call{RunID: "r1", CallID: "c1", Agent: "a"}
	})
	out, err := invoke(tl, `{}`)
	require.NoError(t, err)
	require.Len(t, out, int(nc.MaxPayload())*3/4)
	_, err = invoke(tl, `{}`)
	require.ErrorContains(t, err, "too large for the dedupe store")
	require.EqualValues(t, 1, runs.Load())
}

// A call that runs longer than its lease keeps its claim: its instance
// renews it, so the same call made meanwhile waits for the reply instead of
// taking the call over and running the tool a second time.
func TestDedupeLongCallKeepsItsClaim(t *testing.T) {
	t.Parallel()
	nc := setup(t)
	var runs atomic.Int64
	gate := make(chan struct{})
	const lease = 3 * time.Second
	serve(t, toolsvc.Config{Conn: nc, Name: "slowsvc", Tools: counterTools(&runs, gate), Dedupe: &toolsvc.Dedupe{Lease: lease}})
	si := discover(t, nc, "slowsvc", 1)
	tl := callerTool(t, nc, si, "slowsvc__append", func(context.Context, *loop.RunContext) toolsvc.Call {
		return toolsvc.Call{RunID: "r1", CallID: "c1", Agent: "a"}
	})
	call := func(out chan<- any) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		v, err := tl.Func(ctx, nil, json.RawMessage(`{"line":"a"}`))
		if err != nil {
			v = err
		}
		out <- v
	}
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	kv, err := js.KeyValue(context.Background(), "lovia_tool_calls")
	require.NoError(t, err)
	key := toolsvc.CallKey("slowsvc", "append", toolsvc.Call{RunID: "r1", CallID: "c1"})
	// renewals waits until the claim was written n more times after now:
	// each renewal is a third of the lease apart, so three are a lease.
	renewals := func(n uint64, what string) {
		t.Helper()
		e, err := kv.Get(context.Background(), key)
		require.NoError(t, err)
		from := e.Revision()
		require.Eventually(t, func() bool {
			e, err := kv.Get(context.Background(), key)
			return err == nil && e.Revision() >= from+n
		}, 30*time.Second, 20*time.Millisecond, "waiting for the running call's claim to be renewed %d times (%s)", n, what)
	}

	first, second := make(chan any, 1), make(chan any, 1)
	go call(first)
	require.Eventually(t, func() bool { return runs.Load() == 1 }, 10*time.Second, 5*time.Millisecond, "waiting for the call to run")
	renewals(4, "more than a lease passes while the tool runs")
	go call(second)
	renewals(4, "the same call made again waits more than a lease")
	require.EqualValues(t, 1, runs.Load(), "the same call ran again while the first still ran")
	close(gate)
	require.Equal(t, "appended a", <-first)
	require.Equal(t, "appended a", <-second)
	require.EqualValues(t, 1, runs.Load())
}

// A call the tool refused (invalid arguments) ran nothing: it frees its
// key, so the same ids with arguments the tool takes run.
func TestDedupeRefusedCallFreesItsKey(t *testing.T) {
	t.Parallel()
	nc := setup(t)
	var runs atomic.Int64
	serve(t, toolsvc.Config{Conn: nc, Name: "strict", Tools: counterTools(&runs, nil), Dedupe: &toolsvc.Dedupe{}})
	discover(t, nc, "strict", 1)
	req := func(body string) *nats.Msg {
		t.Helper()
		return request(t, nc, "lovia.tools.strict.append", nats.Header{toolsvc.HeaderRunID: []string{"r1"}, toolsvc.HeaderCallID: []string{"c1"}}, body)
	}
	reply := req(`{"line": 7}`)
	require.Equal(t, toolsvc.CodeInvalidArguments, reply.Header.Get("Nats-Service-Error-Code"))
	require.Equal(t, "appended ok", string(req(`{"line":"ok"}`).Data))
	require.Equal(t, "appended ok", string(req(`{"line":"ok"}`).Data), "the reply of the call that ran is kept")
	require.EqualValues(t, 1, runs.Load())
}

// A call id is unique only within its run: the dedupe keys a reply by
// the run and the call id, refuses the same ids with other arguments, and
// leaves a call without a run id alone.
func TestDedupeKeysByRunAndCall(t *testing.T) {
	t.Parallel()
	nc := setup(t)
	var runs atomic.Int64
	serve(t, toolsvc.Config{Conn: nc, Name: "gosvc", Tools: counterTools(&runs, nil), Dedupe: &toolsvc.Dedupe{}})
	si := discover(t, nc, "gosvc", 1)
	call := func(runID, callID, args string) (any, error) {
		return invoke(callerTool(t, nc, si, "gosvc__append", func(context.Context, *loop.RunContext) toolsvc.Call {
			return toolsvc.Call{RunID: runID, CallID: callID, Agent: "a"}
		}), args)
	}
	raw := func(hdr nats.Header, body string) *nats.Msg {
		t.Helper()
		return request(t, nc, "lovia.tools.gosvc.append", hdr, body)
	}

	t.Run("two runs with one call id each run the tool and get their own reply", func(t *testing.T) {
		before := runs.Load()
		out, err := call("run-gp", "c1", `{"line":"from-gp"}`)
		require.NoError(t, err)
		require.Equal(t, "appended from-gp", out)
		out, err = call("run-gq", "c1", `{"line":"from-gq"}`)
		require.NoError(t, err)
		require.Equal(t, "appended from-gq", out, "run-gq got another run's reply")
		require.Equal(t, before+2, runs.Load())
	})
	t.Run("the same run and call id again answer the stored reply, however the JSON is laid out", func(t *testing.T) {
		before := runs.Load()
		out, err := call("run-gp", "c1", "{ \"line\" :  \"from-gp\" }")
		require.NoError(t, err)
		require.Equal(t, "appended from-gp", out)
		require.Equal(t, before, runs.Load())
	})
	t.Run("the same run and call id with other arguments are refused", func(t *testing.T) {
		before := runs.Load()
		_, err := call("run-gp", "c1", `{"line":"other"}`)
		require.ErrorIs(t, err, toolsvc.ErrCallConflict)
		var te *loop.ToolError
		require.ErrorAs(t, err, &te)
		require.Contains(t, te.Message, `call id "c1" of run "run-gp" was used by an earlier call with other arguments`)
		require.Equal(t, before, runs.Load())
		out, err := call("run-gp", "c1", `{"line":"from-gp"}`)
		require.NoError(t, err)
		require.Equal(t, "appended from-gp", out, "the earlier reply stays")
	})
	t.Run("a run id and a call id that join to the same text are two calls", func(t *testing.T) {
		before := runs.Load()
		_, err := call("ab", "c", `{"line":"1"}`)
		require.NoError(t, err)
		out, err := call("a", "bc", `{"line":"2"}`)
		require.NoError(t, err)
		require.Equal(t, "appended 2", out)
		require.Equal(t, before+2, runs.Load())
	})
	t.Run("a call without a run id is not deduplicated", func(t *testing.T) {
		before := runs.Load()
		hdr := nats.Header{toolsvc.HeaderCallID: []string{"zz"}}
		require.Equal(t, "appended x", string(raw(hdr, `{"line":"x"}`).Data))
		require.Equal(t, "appended y", string(raw(hdr, `{"line":"y"}`).Data))
		require.Equal(t, "appended y", string(raw(hdr, `{"line":"y"}`).Data))
		require.Equal(t, before+3, runs.Load())
	})
	t.Run("a raw call with both headers is deduplicated", func(t *testing.T) {
		before := runs.Load()
		hdr := nats.Header{toolsvc.HeaderRunID: []string{"raw-run"}, toolsvc.HeaderCallID: []string{"zz"}}
		require.Equal(t, "appended x", string(raw(hdr, `{"line":"x"}`).Data))
		require.Equal(t, "appended x", string(raw(hdr, `{"line":"x"}`).Data))
		reply := raw(hdr, `{"line":"y"}`)
		require.Equal(t, toolsvc.CodeConflict, reply.Header.Get("Nats-Service-Error-Code"))
		require.Contains(t, reply.Header.Get("Nats-Service-Error"), "give each call its own Lovia-Call-Id")
		require.Equal(t, before+1, runs.Load())
	})
}

// Error replies answered from the calls' goroutines, many at once (under
// -race: the micro library reads a request's reply state as its handler
// returns), and an error whose text spans lines: it arrives on one line,
// and the reply's other headers intact.
func TestErrorReplies(t *testing.T) {
	t.Parallel()
	nc := setup(t)
	multi := loop.NewTool("multi", "Fails over two lines.", func(context.Context, *loop.RunContext, struct{}) (string, error) {
		return "", &loop.ToolError{Tool: "multi", Message: "line one\r\nline two\nNats-Service-Error-Code: 200"}
	})
	serve(t, toolsvc.Config{Conn: nc, Name: "errsvc", Tools: []*loop.Tool{multi}})
	discover(t, nc, "errsvc", 1)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			reply, err := nc.Request("lovia.tools.errsvc.multi", []byte(`{}`), 10*time.Second)
			if !assert.NoError(t, err) {
				return
			}
			assert.Equal(t, toolsvc.CodeToolError, reply.Header.Get("Nats-Service-Error-Code"))
			assert.Equal(t, []string{"line one line two Nats-Service-Error-Code: 200"}, reply.Header.Values("Nats-Service-Error"))
		})
	}
	wg.Wait()
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	nc := setup(t)
	tools := counterTools(new(atomic.Int64), nil)
	for _, tc := range []struct {
		cfg  toolsvc.Config
		want string
	}{
		{toolsvc.Config{Name: "x", Tools: tools}, "Conn is required"},
		{toolsvc.Config{Conn: nc, Name: "x"}, "serve at least one tool"},
		{toolsvc.Config{Conn: nc, Name: "a.b", Tools: tools}, `service "a.b" must be`},
		{toolsvc.Config{Conn: nc, Name: "x", Tools: append(tools, tools[0])}, `tool "add" is served twice`},
	} {
		_, err := toolsvc.New(tc.cfg)
		require.ErrorContains(t, err, tc.want)
	}
	require.True(t, errors.Is(toolsvc.ErrNoService, toolsvc.ErrNoService))
}
