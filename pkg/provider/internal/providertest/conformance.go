package providertest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Adapter describes an adapter to [RunLoop]: how to build it against a
// fixture server, the fixtures that play the conformance scenarios of
// lovia's loop and the checks of the request bodies it sends.
type Adapter struct {
	// New builds the provider against srv; native asks for native
	// structured output (ProviderInfo.NativeJSONSchema).
	New func(t *testing.T, srv *Server, native bool) loop.Provider

	// SSE fixtures.
	Text       string // streams "Hello! How can I help?"
	TextUsage  loop.Usage
	AddCall    string // one call: c1 add {"a":2,"b":3}
	Answer     string // streams "The answer is 5."
	Structured string // streams {"result": 7}
	// CutAfter is a marker of Text before which the stream is cut; the
	// text before it is "Hello!".
	CutAfter string

	// Error responses.
	RateLimit      Response // 429 with Retry-After: RetryAfter
	RetryAfter     time.Duration
	Overflow       Response // a context-length 400 naming OverflowWindow
	OverflowWindow int
	Unauthorized   Response // 401

	// ToolRoundTrip checks the second request of S2: it carries call c1
	// and its result "5".
	ToolRoundTrip func(t *testing.T, second Request)
	// NativeSchema checks a request that carries the output schema
	// natively; PromptSchema one that does not.
	NativeSchema func(t *testing.T, first Request)
	PromptSchema func(t *testing.T, first Request)
}

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

type result struct {
	Result int `json:"result"`
}

func addTool() *loop.Tool {
	return loop.NewTool("add", "Add two integers.", func(_ context.Context, _ *loop.RunContext, in addIn) (int, error) {
		return in.A + in.B, nil
	})
}

// sleeps records the waits of a retry policy without waiting.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) policy(attempts int) *loop.RetryPolicy {
	return &loop.RetryPolicy{MaxAttempts: attempts, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond,
		Sleep: func(_ context.Context, d time.Duration) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.d = append(s.d, d)
			return nil
		}}
}

func (s *sleeps) waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

// RunLoop runs the conformance scenarios through loop.Runner against the
// adapter's fixture server: the same scenarios the scripted provider passes
// for plain text (S1), tool round trips (S2), structured output (S43 and
// the native path) and provider retries (S58, S59), plus the failures that
// must not be retried.
func RunLoop(t *testing.T, a Adapter) {
	t.Helper()
	scenarios := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"S1_plain_text", func(t *testing.T) {
			srv := NewServer(t, SSE(a.Text))
			ag := &loop.Agent{Name: "a", Instructions: "be brief", Provider: a.New(t, srv, false)}
			evs, res, err := run(t, ag, "hi")
			require.NoError(t, err)
			require.Equal(t, "Hello! How can I help?", res.Output)
			require.Equal(t, 1, res.Turns)
			require.Equal(t, []string{"In(user,hi)", "Txt(Hello! How can I help?)"}, EntrySigs(res.Entries))
			require.Equal(t, a.TextUsage, res.Usage)
			require.NotNil(t, res.FinishReason)
			require.Equal(t, "stop", *res.FinishReason)
			require.Equal(t, []string{"RS(a)", "TS(1)", "TD+", "MC[Txt(Hello! How can I help?)]", "TE(1)", "RC"}, Sig(evs))
		}},
		{"S2_tool_round_trip", func(t *testing.T) {
			srv := NewServer(t, SSE(a.AddCall), SSE(a.Answer))
			ag := &loop.Agent{Name: "a", Provider: a.New(t, srv, false), Tools: []*loop.Tool{addTool()}}
			evs, res, err := run(t, ag, "add")
			require.NoError(t, err)
			require.Equal(t, "The answer is 5.", res.Output)
			require.Equal(t, 2, res.Turns)
			require.Equal(t, []string{"In(user,add)", `Call(c1,add,{"a":2,"b":3})`, "Res(c1,5)", "Txt(The answer is 5.)"}, EntrySigs(res.Entries))
			require.JSONEq(t, "5", string(res.Entries[2].Raw))
			require.Equal(t, []string{"RS(a)", "TS(1)", `MC[Call(c1,add,{"a":2,"b":3})]`, "TCS(c1)", "TCC(c1,ok)", "TE(1)",
				"TS(2)", "TD+", "MC[Txt(The answer is 5.)]", "TE(2)", "RC"}, Sig(evs))
			reqs := srv.Requests()
			require.Len(t, reqs, 2)
			require.Contains(t, string(reqs[0].Body), `"add"`, "the tool schema rides along")
			a.ToolRoundTrip(t, reqs[1])
		}},
		{"S43_repair_succeeds_prompt_mode", func(t *testing.T) {
			srv := NewServer(t, SSE(a.Text), SSE(a.Structured))
			ag := &loop.Agent{Name: "a", Provider: a.New(t, srv, false), Output: loop.OutputFor[result]()}
			evs, res, err := run(t, ag, "compute")
			require.NoError(t, err)
			require.Equal(t, result{Result: 7}, res.Output)
			require.Equal(t, 2, res.Turns)
			require.Equal(t, []string{"RS(a)", "TS(1)", "TD+", "MC[Txt(Hello! How can I help?)]", "TE(1)",
				"TS(2)", "TD+", `MC[Txt({"result": 7})]`, "TE(2)", "RC"}, Sig(evs))
			repair := res.Entries[2]
			require.Equal(t, loop.KindInput, repair.Kind)
			require.Contains(t, repair.Content, "could not be parsed")
			reqs := srv.Requests()
			a.PromptSchema(t, reqs[0])
			require.Contains(t, string(reqs[1].Body), "could not be parsed", "request 2 carries the repair prompt")
		}},
		{"structured_output_native", func(t *testing.T) {
			srv := NewServer(t, SSE(a.Structured))
			p := a.New(t, srv, true)
			require.True(t, p.Info().NativeJSONSchema)
			ag := &loop.Agent{Name: "a", Provider: p, Output: loop.OutputFor[result]()}
			_, res, err := run(t, ag, "compute")
			require.NoError(t, err)
			require.Equal(t, result{Result: 7}, res.Output)
			require.Equal(t, 1, res.Turns)
			a.NativeSchema(t, srv.Requests()[0])
		}},
		{"S58_rate_limited_then_success", func(t *testing.T) {
			srv := NewServer(t, a.RateLimit, SSE(a.Text))
			ag := &loop.Agent{Name: "a", Provider: a.New(t, srv, false)}
			var s sleeps
			evs, res, err := run(t, ag, "hi", loop.WithRetry(s.policy(5)))
			require.NoError(t, err)
			require.Equal(t, "Hello! How can I help?", res.Output)
			require.Len(t, srv.Requests(), 2)
			require.Equal(t, []time.Duration{a.RetryAfter}, s.waits(), "the wait honours Retry-After")
			require.Equal(t, []string{"RS(a)", "TS(1)", "TD+", "MC[Txt(Hello! How can I help?)]", "TE(1)", "RC"}, Sig(evs), "no OD: nothing was streamed")
		}},
		{"S59_stream_cut_then_retry", func(t *testing.T) {
			cut := Cut(t, a.Text, a.CutAfter)
			srv := NewServer(t, cut, SSE(a.Text))
			ag := &loop.Agent{Name: "a", Provider: a.New(t, srv, false)}
			var s sleeps
			evs, res, err := run(t, ag, "hi", loop.WithRetry(s.policy(3)))
			require.NoError(t, err)
			require.Equal(t, "Hello! How can I help?", res.Output)
			require.Len(t, srv.Requests(), 2)
			require.Equal(t, []string{"RS(a)", "TS(1)", "TD+", "OD", "TD+", "MC[Txt(Hello! How can I help?)]", "TE(1)", "RC"}, Sig(evs))
			d := DeltaTexts(evs)
			require.Equal(t, "Hello!", strings.Join(d[:indexOf(d, "<OD>")], ""), "the cut attempt's text is voided")
			require.Equal(t, []string{"In(user,hi)", "Txt(Hello! How can I help?)"}, EntrySigs(res.Entries))
		}},
		{"context_overflow_is_not_retried", func(t *testing.T) {
			srv := NewServer(t, a.Overflow)
			ag := &loop.Agent{Name: "a", Provider: a.New(t, srv, false)}
			var s sleeps
			evs, _, err := run(t, ag, "hi", loop.WithRetry(s.policy(5)))
			var co *loop.ContextOverflowError
			require.ErrorAs(t, err, &co)
			require.Equal(t, a.OverflowWindow, co.ReportedWindow)
			require.Len(t, srv.Requests(), 1)
			require.Equal(t, []string{"RS(a)", "TS(1)", "RF(ContextOverflowError)"}, Sig(evs))
		}},
		{"unauthorized_is_not_retried", func(t *testing.T) {
			srv := NewServer(t, a.Unauthorized)
			ag := &loop.Agent{Name: "a", Provider: a.New(t, srv, false)}
			var s sleeps
			evs, _, err := run(t, ag, "hi", loop.WithRetry(s.policy(5)))
			var pe *loop.ProviderError
			require.ErrorAs(t, err, &pe)
			require.False(t, pe.IsRetryable())
			require.NotEmpty(t, pe.Hint)
			require.Len(t, srv.Requests(), 1)
			require.Empty(t, s.waits())
			require.Equal(t, []string{"RS(a)", "TS(1)", "RF(ProviderError)"}, Sig(evs))
			info := loop.Describe(err)
			require.False(t, info.Retryable)
			require.Equal(t, pe.Hint, info.Hint)
		}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			sc.fn(t)
		})
	}
}

func run(t *testing.T, a *loop.Agent, input string, opts ...loop.RunOption) ([]loop.Event, *loop.RunResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := loop.NewRunner(loop.RunnerConfig{}).Stream(ctx, a, []loop.Entry{loop.UserText(input)}, opts...)
	var evs []loop.Event
	for ev := range h.Events() {
		evs = append(evs, ev)
	}
	res, err := h.Result()
	return evs, res, err
}

func indexOf(s []string, v string) int {
	for i := range s {
		if s[i] == v {
			return i
		}
	}
	return len(s)
}

// Sig renders events in the conformance notation; consecutive
// deltas of one kind collapse into "TD+" / "RD+".
func Sig(evs []loop.Event) []string {
	var out []string
	for _, ev := range evs {
		var s string
		switch e := ev.(type) {
		case *loop.RunStarted:
			s = "RS(" + e.Agent + ")"
		case *loop.TurnStarted:
			s = fmt.Sprintf("TS(%d)", e.TurnNo)
		case *loop.TurnEnded:
			s = fmt.Sprintf("TE(%d)", e.TurnNo)
		case *loop.TextDelta:
			s = "TD+"
		case *loop.ReasoningDelta:
			s = "RD+"
		case *loop.OutputDiscarded:
			s = "OD"
		case *loop.MessageCompleted:
			s = "MC[" + strings.Join(EntrySigs(e.Entries), " ") + "]"
		case *loop.ToolCallStarted:
			s = "TCS(" + e.Call.ID + ")"
		case *loop.ToolCallCompleted:
			st := "ok"
			if e.IsError {
				st = "err"
			}
			s = fmt.Sprintf("TCC(%s,%s)", e.Call.ID, st)
		case *loop.RunCompleted:
			s = "RC"
		case *loop.RunFailed:
			s = "RF(" + e.Error.Type + ")"
		default:
			s = string(ev.Type())
		}
		if (s == "TD+" || s == "RD+") && len(out) > 0 && out[len(out)-1] == s {
			continue
		}
		out = append(out, s)
	}
	return out
}

// DeltaTexts lists the text deltas, with "<OD>" where output was discarded.
func DeltaTexts(evs []loop.Event) []string {
	var out []string
	for _, ev := range evs {
		switch e := ev.(type) {
		case *loop.TextDelta:
			out = append(out, e.Delta)
		case *loop.OutputDiscarded:
			out = append(out, "<OD>")
		}
	}
	return out
}

// EntrySigs renders entries in the conformance notation.
func EntrySigs(es []loop.Entry) []string {
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, EntrySig(e))
	}
	return out
}

// EntrySig renders one entry.
func EntrySig(e loop.Entry) string {
	switch e.Kind {
	case loop.KindInput:
		return fmt.Sprintf("In(%s,%s)", e.Role, e.ContentText())
	case loop.KindAssistantText:
		return "Txt(" + e.Text + ")"
	case loop.KindReasoning:
		return "Rsn(" + e.Text + ")"
	case loop.KindToolCall:
		return fmt.Sprintf("Call(%s,%s,%s)", e.CallID, e.Name, e.Arguments)
	case loop.KindToolResult:
		if e.IsError {
			return fmt.Sprintf("ResErr(%s,%s)", e.CallID, e.Output)
		}
		return fmt.Sprintf("Res(%s,%s)", e.CallID, e.Output)
	}
	return string(e.Kind)
}

// Field walks a decoded JSON body along keys and indexes ("messages", 1,
// "content") and fails the test when the path does not exist.
func Field(t testing.TB, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			require.True(t, ok, "not an object at %q", k)
			v, ok = m[k]
			require.True(t, ok, "no field %q", k)
		case int:
			s, ok := v.([]any)
			require.True(t, ok && k < len(s), "no index %d", k)
			v = s[k]
		}
	}
	return v
}

// JSONEq asserts that v encodes to the JSON want.
func JSONEq(t testing.TB, want string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	require.JSONEq(t, want, string(b))
}
