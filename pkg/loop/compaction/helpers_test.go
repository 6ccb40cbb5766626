package compaction_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/compaction"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// provider is a model endpoint that only identifies itself; Stream fails.
type provider struct {
	endpoint, model string
}

func (p *provider) Info() loop.ProviderInfo {
	return loop.ProviderInfo{Name: "fake", Model: p.model, Endpoint: p.endpoint}
}

func (p *provider) Stream(context.Context, *loop.ModelRequest, func(loop.Delta) error) error {
	return errors.New("fake provider: no model")
}

// discoverer also reports a context window and counts the questions.
type discoverer struct {
	provider
	window int
	err    error
	asked  atomic.Int32
}

func (d *discoverer) DiscoverContextWindow(context.Context) (int, error) {
	d.asked.Add(1)
	return d.window, d.err
}

// estimating counts tokens itself.
type estimating struct {
	provider
	fn func([]loop.Entry, []loop.ToolSchema) (int, error)
}

func (e *estimating) EstimateTokens(es []loop.Entry, ts []loop.ToolSchema) (int, error) {
	return e.fn(es, ts)
}

func newProvider() *provider { return &provider{endpoint: "https://api.example", model: "m1"} }

// fakeSummarizer answers with a summary naming the folded entries.
type fakeSummarizer struct {
	mu    sync.Mutex
	calls []*compaction.SummaryRequest
	fail  int // fail the next n calls
	text  func(req *compaction.SummaryRequest) string
}

func (f *fakeSummarizer) Summarize(_ context.Context, req *compaction.SummaryRequest) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cp := *req
	cp.Entries = append([]loop.Entry(nil), req.Entries...)
	f.calls = append(f.calls, &cp)
	if f.fail > 0 {
		f.fail--
		return "", errors.New("summarizer down")
	}
	if f.text != nil {
		return f.text(req), nil
	}
	return fmt.Sprintf("## Session intent\nfolded %d entries after %d chars of prior", len(req.Entries), len(req.Prior)), nil
}

func (f *fakeSummarizer) n() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// Transcript builders.
func user(s string) loop.Entry { return loop.UserText(s) }
func sys(s string) loop.Entry  { return loop.SystemText(s) }
func call(id string) loop.Entry {
	return loop.ToolCallEntry(id, "f", `{}`)
}
func res(id, out string) loop.Entry { return loop.ToolResultEntry(id, "f", out, false) }
func text(s string) loop.Entry      { return loop.AssistantText(s) }

// payload returns n deterministic characters distinct per seed.
func payload(seed string, n int) string {
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(seed)
		b.WriteString(" lorem ipsum dolor sit amet; ")
	}
	return b.String()[:n]
}

// agentic returns a system entry, a user request and turns tool-call
// turns, each result outLen characters; every tenth turn adds a short
// assistant remark and a user follow-up.
func agentic(turns, outLen int) []loop.Entry {
	es := []loop.Entry{sys("You are a test agent."), user("Please investigate the logs.")}
	for i := range turns {
		id := fmt.Sprintf("c%d", i)
		es = append(es, call(id), res(id, payload(id, outLen)))
		if i%10 == 9 {
			es = append(es, text(fmt.Sprintf("Checked %d files.", i+1)), user("Continue."))
		}
	}
	return es
}

// request builds a compaction request with a fresh state.
func request(p loop.Provider, es []loop.Entry) *loop.CompactRequest {
	return &loop.CompactRequest{Entries: es, Provider: p, Model: p.Info().Model, State: map[string]any{}}
}

func compact(t testing.TB, c *compaction.Compaction, req *loop.CompactRequest) *loop.CompactResult {
	t.Helper()
	res, err := c.Compact(context.Background(), req)
	require.NoError(t, err)
	require.NotNil(t, res)
	return res
}

// stateOf returns the sticky state map of a request.
func stateOf(t testing.TB, req *loop.CompactRequest) map[string]any {
	t.Helper()
	m, ok := req.State[compaction.StateKey].(map[string]any)
	require.True(t, ok, "state saved under %q", compaction.StateKey)
	return m
}

// jsonRoundTrip passes v through JSON, as a checkpoint store would.
func jsonRoundTrip(t testing.TB, v map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

// viewBytes encodes a view entry by entry (what a provider would render).
func viewBytes(t testing.TB, es []loop.Entry) []byte {
	t.Helper()
	var b []byte
	for i := range es {
		j, err := json.Marshal(es[i])
		require.NoError(t, err)
		b = append(b, j...)
		b = append(b, '\n')
	}
	return b
}

// outputs returns the tool result outputs of es by call id.
func outputs(es []loop.Entry) map[string]string {
	m := map[string]string{}
	for _, e := range es {
		if e.Kind == loop.KindToolResult {
			m[e.CallID] = e.Output
		}
	}
	return m
}
