package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/console"
	"github.com/lovia-fleet/lovia/pkg/gateway"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// The scripted agents of the tests: one that streams its answer a word at
// a time, one whose file write needs an approval (and keeps a todo list),
// and one that sleeps in a tool long enough to kill its worker mid-run.
const agentsYAML = `
agents:
  - name: streamer
    model: scripted
    script:
      - text: "Streaming one word at a time so that the console shows the answer growing."
        delay_ms: 250
  - name: slowstream
    model: scripted
    script:
      - text: "This answer streams slowly enough for the test to cut the connection in the middle of it and see the console resume."
        delay_ms: 300
  - name: gated
    model: scripted
    tools: [append_file]
    approval: [append_file]
    plugins: {todo: {}}
    script:
      - call: {name: todo_write, args: {todos: [{content: "Write the note", status: in_progress, active_form: "Writing the note"}, {content: "Report back", status: pending}]}, id: plan}
      - call: {name: append_file, args: {path: notes.txt, line: "hello from the console"}, id: write1}
      - text: The note is written.
  - name: asker
    model: scripted
    tools: [ask_human]
    script:
      - call: {name: ask_human, args: {question: "Which colour should the report be?"}, id: ask1}
      - text: Blue it is.
  - name: triage
    model: scripted
    handoffs: [billing]
    script:
      - call: {name: transfer_to_billing, args: {}, id: hand1}
  - name: billing
    model: scripted
    script:
      - text: Billing here.
      - text: Billing here, your refund is on its way.
  - name: talker
    model: scripted
    script:
      - text: "This answer streams for several seconds, long enough to kill the worker in the middle of it, so that the next worker streams it again."
        delay_ms: 400
  - name: sleeper
    model: scripted
    tools: [sleep]
    script:
      - call: {name: sleep, args: {ms: 6000}, id: nap}
      - text: Awake again after the nap.
`

const (
	token         = "console-test-token"
	streamed      = "Streaming one word at a time so that the console shows the answer growing."
	slowStreamed  = "This answer streams slowly enough for the test to cut the connection in the middle of it and see the console resume."
	talked        = "This answer streams for several seconds, long enough to kill the worker in the middle of it, so that the next worker streams it again."
	streamSession = "console-session"
	// finalText is the answer once the run completed, else "".
	finalText = `document.querySelector('.ev.outcome.completed') ? document.querySelector('.bubble.assistant .text').textContent : ''`
)

// syntheticEvents feeds the run page's timeline events no scripted run
// produces (a compaction, a failed call, a failed todo_write, unknown
// types, missing data, markup in text) and reports what it shows.
const syntheticEvents = `(async () => {
  const {Timeline} = await import('/console/js/timeline.js');
  const el = document.createElement('div');
  const todo = document.createElement('section');
  todo.hidden = true;
  todo.append(document.createElement('ol'));
  document.body.append(el, todo);
  const tl = new Timeline(el, {todo, decide: async () => ({accepted: true}), onTerminal: () => {}});
  const hostile = '<img src=x onerror="window.pwned=true">';
  const events = [
    ['run_started', {worker: hostile, input: [{kind: 'input', role: 'user', content: hostile}]}],
    ['turn_started', {turn: 1}],
    ['text_delta', {delta: hostile}],
    ['message_completed', {entries: [{kind: 'assistant_text', text: hostile}, {kind: 'tool_call', call_id: 'f1', name: 'read_page', arguments: '{"url": "' + hostile + '"}'}]}],
    ['tool_call_failed', {call: {id: 'f1', name: 'read_page', arguments: '{}'}, error: {type: 'Timeout', message: 'took too long', hint: 'retry with a smaller page'}}],
    ['tool_call_completed', {call: {id: 't1', name: 'todo_write', arguments: 'not json'}, result: 'bad list', output: 'bad list', is_error: true}],
    ['context_compacted', {notice: {reason: 'threshold', reactive: false, summary: 'the summary so far', tokens_before: 9000, tokens_after: 1200}, entries_before: 40, entries_after: 6}],
    ['approval_resolved', {call_id: 'gone', decision: 'approve', reason: ''}],
    ['something_new', {x: 1}],
    ['constructor', {}],
    ['text_delta', null],
    ['handoff_occurred', undefined],
  ];
  let seq = 0;
  for (const [type, data] of events) tl.add({seq: ++seq, type, agent: 'a', turn: 1, time: new Date().toISOString(), data});
  return {text: el.textContent, elements: el.querySelectorAll('img, script').length, pwned: window.pwned === true, todo_shown: !todo.hidden};
})()`

// wordsStreaming is true once the streaming answer has n words.
func wordsStreaming(n int) string {
	return `(() => { const el = document.querySelector('.bubble.assistant.streaming .text');
	  return !!el && el.textContent.trim().split(/\s+/).length >= ` + strconv.Itoa(n) + `; })()`
}

// eventRequests records the Last-Event-ID of each events request.
type eventRequests struct {
	mu   sync.Mutex
	seen map[string][]string // run id → Last-Event-ID headers, in order
}

func (e *eventRequests) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rest, ok := strings.CutPrefix(r.URL.Path, "/v1/runs/"); ok && r.Method == http.MethodGet && strings.HasSuffix(rest, "/events") {
			e.mu.Lock()
			id := strings.TrimSuffix(rest, "/events")
			e.seen[id] = append(e.seen[id], r.Header.Get("Last-Event-ID"))
			e.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

func (e *eventRequests) of(runID string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.seen[runID]...)
}

// stack is the fleet under the browser.
type stack struct {
	fleet     *fleettest.Fleet
	gw        *httptest.Server // the gateway, console at /
	other     *httptest.Server // the console alone, on another origin
	events    *eventRequests
	workspace string
	victim    *exec.Cmd
	artifacts string
}

func setup(t *testing.T) *stack {
	t.Helper()
	s := &stack{events: &eventRequests{seen: map[string][]string{}}, workspace: t.TempDir()}
	s.artifacts = os.Getenv("LOVIA_ARTIFACTS")
	if s.artifacts == "" {
		s.artifacts = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(s.artifacts, 0o755))
	t.Logf("screenshots in %s", s.artifacts)

	s.fleet = fleettest.Start(t, fleettest.Options{AgentsYAML: agentsYAML, Workers: -1})
	s.other = httptest.NewServer(console.Handler())
	t.Cleanup(s.other.Close)
	gw, err := gateway.New(gateway.Config{API: s.fleet.API, Client: s.fleet.Client, Conn: s.fleet.Conn,
		Tokens: []string{token}, CORSOrigins: []string{s.other.URL}, Heartbeat: 2 * time.Second})
	require.NoError(t, err)
	s.gw = httptest.NewServer(s.events.wrap(gw.Handler()))
	t.Cleanup(s.gw.Close)

	// The worker every run starts on, a real process the test kills -9.
	agents := filepath.Join(t.TempDir(), "agents.yaml")
	require.NoError(t, os.WriteFile(agents, []byte(agentsYAML), 0o644))
	out := &strings.Builder{}
	var outMu sync.Mutex
	s.victim = exec.Command(loviaBin, "worker", "--nats", s.fleet.Server.ClientURL(), "--agents", agents,
		"--workspace", s.workspace, "--id", "victim", "--ack-wait", "30s")
	s.victim.Stdout = writerFunc(func(b []byte) (int, error) { outMu.Lock(); defer outMu.Unlock(); return out.Write(b) })
	s.victim.Stderr = s.victim.Stdout
	require.NoError(t, s.victim.Start())
	t.Cleanup(func() {
		if s.victim.ProcessState == nil {
			_ = s.victim.Process.Signal(syscall.SIGKILL)
			_, _ = s.victim.Process.Wait()
		}
		if t.Failed() {
			outMu.Lock()
			t.Logf("worker victim output:\n%s", out.String())
			outMu.Unlock()
		}
	})
	s.waitWorkers(t, "the victim worker to announce itself", func(ids []string) bool { return contains(ids, "victim") })
	return s
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// waitWorkers polls the fleet's live workers until ok says so.
func (s *stack) waitWorkers(t *testing.T, what string, ok func(ids []string) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rep, err := s.fleet.API.Workers(ctx)
		cancel()
		var ids []string
		if err == nil {
			for _, w := range rep.Workers {
				ids = append(ids, w.ID)
			}
			if ok(ids) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 30s for %s: workers %v, last error %v", what, ids, err)
		}
		time.Sleep(100 * time.Millisecond) // polling the fleet's presence, with a deadline
	}
}

// submit starts a run through the API (not the browser).
func (s *stack) submit(t *testing.T, agent string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := s.fleet.Client.Submit(ctx, &bus.RunRequest{Agent: agent, Input: bus.TextInput("go")})
	require.NoError(t, err)
	return rep.RunID
}

// TestConsole drives the console in headless Chromium against a fleet:
// the token prompt, a run started from the runs page and streamed live, an
// approval given with a click, a stream cut and resumed from the last event
// id, a run followed across a kill -9 of its worker process, every page's
// screenshot, and the console served from another origin (CORS).
func TestConsole(t *testing.T) {
	s := setup(t)
	b := newBrowser(t, s.artifacts)
	const long = 45 * time.Second

	t.Run("asks for the token and keeps it", func(t *testing.T) {
		b.t = t
		b.open(s.gw.URL + "/#/workers")
		b.visible("the banner asking for a token", "#banner:not([hidden])", long)
		require.Contains(t, b.textOf("#banner"), "needs a bearer token")
		b.do("entering the token", long,
			chromedp.WaitVisible(chromedp.CSS("#settings-token")),
			chromedp.SetValue(chromedp.CSS("#settings-token"), token),
			chromedp.Click(chromedp.CSS("#settings-save")))
		b.visible("the victim worker in the workers table", `#workers tr[data-worker="victim"]`, long)
		// The token survives a reload (localStorage).
		b.reload()
		b.visible("the workers table after a reload", `#workers tr[data-worker="victim"]`, long)
	})

	var streamRun string
	t.Run("starts a run and streams its text as it arrives", func(t *testing.T) {
		b.t = t
		b.open(s.gw.URL + "/#/runs")
		b.present("the streamer agent in the start form", `#start-agent option[value="streamer"]`, long)
		b.do("starting a run from the form", long,
			chromedp.SetValue(chromedp.CSS("#start-agent"), "streamer"),
			chromedp.SetValue(chromedp.CSS("#start-input"), "Say something, slowly."),
			chromedp.SetValue(chromedp.CSS("#start-session"), streamSession),
			chromedp.Click(chromedp.CSS("#start-submit")))
		b.visible("the run page", "#run-id", long)
		streamRun = b.textOf("#run-id")
		require.NotEmpty(t, streamRun)

		// Part of the answer, while it still streams.
		partial := waitFor[string](b, "a partial answer still streaming", long,
			`(() => { const el = document.querySelector('.bubble.assistant.streaming .text');
			  return el && el.textContent.trim().split(/\s+/).length >= 2 && el.textContent.length < `+strconv.Itoa(len(streamed))+` ? el.textContent : ''; })()`)
		require.True(t, strings.HasPrefix(streamed, partial), "the partial text %q is the start of the answer", partial)
		require.Less(t, len(partial), len(streamed))

		final := waitFor[string](b, "the run to complete", long, finalText)
		require.Equal(t, streamed, final)
		b.visible("the completed chip", `#run-status .chip-completed`, long)
	})

	t.Run("approves a gated call with a click", func(t *testing.T) {
		b.t = t
		// The runs page, filtered to runs awaiting a person, is open before
		// the run exists: the run shows up in it by itself.
		b.open(s.gw.URL + "/#/runs?awaiting=true")
		b.visible("the runs list awaiting a person", "#runs-list table", long)
		id := s.submit(t, "gated")
		row := `#runs-list tr[data-run-id="` + id + `"]`
		b.visible("the gated run in the awaiting list, without a reload", row+" .badge.awaiting", long)
		require.Contains(t, b.textOf(row+" .badge.awaiting"), "append_file")
		b.do("opening the run from the list", long, chromedp.Click(chromedp.CSS(row+" a")))
		approve := `.tool[data-call-id="write1"] button.approve`
		b.visible("the approve button of the gated call", approve, long)
		b.visible("the todo list", `#todo li[data-status="in_progress"]`, long)
		todo := b.textOf("#todo")
		require.Contains(t, todo, "Writing the note")
		require.Contains(t, todo, "Report back")
		_, err := os.Stat(filepath.Join(s.workspace, "notes.txt"))
		require.True(t, os.IsNotExist(err), "the gated call did not run before the approval")
		waitFor[bool](b, "the turns fact to say the run is in turn 2 (from its events)", long,
			`document.querySelector('[data-fact="turns"] dd')?.textContent === '2'`)
		b.screenshot("run-awaiting-approval")

		b.do("clicking approve", long, chromedp.Click(chromedp.CSS(approve)))
		b.visible("the approval's decision", `.tool[data-call-id="write1"] .decision-approve`, long)
		b.visible("the run's completion", `.ev.outcome.completed`, long)
		b.visible("the call's result", `.tool[data-call-id="write1"][data-state="done"] .tool-result`, long)
		notes, err := os.ReadFile(filepath.Join(s.workspace, "notes.txt"))
		require.NoError(t, err)
		require.Equal(t, "hello from the console\n", string(notes))
		b.screenshot("run")
	})

	t.Run("answers an ask_human question", func(t *testing.T) {
		b.t = t
		id := s.submit(t, "asker")
		b.open(s.gw.URL + "/#/runs/" + id)
		card := `.tool[data-call-id="ask1"]`
		b.visible("the question and its answer box", card+" textarea.answer", long)
		require.Contains(t, b.textOf(card+" .question"), "Which colour should the report be?")
		b.do("answering", long,
			chromedp.SetValue(chromedp.CSS(card+" textarea.answer"), "blue, please"),
			chromedp.Click(chromedp.CSS(card+" button.approve")))
		b.visible("the run's completion", `.ev.outcome.completed`, long)
		require.Contains(t, b.textOf(card+" .tool-result"), "blue, please", "the answer is the tool's result")
		require.Equal(t, "answered: blue, please", b.textOf(card+" .decision"), "an answer, not an approval")
	})

	t.Run("shows a handoff", func(t *testing.T) {
		b.t = t
		id := s.submit(t, "triage")
		b.open(s.gw.URL + "/#/runs/" + id)
		b.visible("the handoff", `.ev.handoff`, long)
		require.Contains(t, b.textOf(`.ev.handoff`), "triage → billing")
		b.visible("the run's completion", `.ev.outcome.completed`, long)
		require.Contains(t, b.textOf(`.ev.outcome.completed`), "final agent billing")
	})

	t.Run("injects a message and cancels a run", func(t *testing.T) {
		b.t = t
		id := s.submit(t, "sleeper")
		b.open(s.gw.URL + "/#/runs/" + id)
		b.visible("the nap tool running", `.tool[data-call-id="nap"][data-state="running"]`, long)
		b.do("injecting a message", long,
			chromedp.SetValue(chromedp.CSS("#inject-text"), "also mention the weather"),
			chromedp.Click(chromedp.CSS(`#inject button[type="submit"]`)))
		b.visible("the queued message", `#inject-pending .badge.pending`, long)
		b.visible("the message folded into the run", `.bubble.injected`, long)
		require.Contains(t, b.textOf(`.bubble.injected`), "also mention the weather")
		waitFor[bool](b, "the queued badge to go once delivered", long, `!document.querySelector('#inject-pending .badge.pending')`)
		b.visible("the run's completion", `.ev.outcome.completed`, long)

		id = s.submit(t, "sleeper")
		b.open(s.gw.URL + "/#/runs/" + id)
		b.visible("the nap tool running", `.tool[data-call-id="nap"][data-state="running"]`, long)
		b.do("cancelling", long,
			chromedp.Click(chromedp.CSS("#cancel")),
			chromedp.WaitVisible(chromedp.CSS("#cancel-confirm")),
			chromedp.SetValue(chromedp.CSS("#cancel-reason"), "not needed"),
			chromedp.Click(chromedp.CSS("#cancel-confirm")))
		b.visible("the run's failure", `.ev.outcome.failed`, long)
		require.Contains(t, b.textOf(`.ev.outcome.failed`), "Cancelled")
		b.visible("the failed chip", `#run-status .chip-failed`, long)
		b.present("no controls on an ended run", `#run-controls[hidden]`, long)
	})

	t.Run("resumes a cut stream after the last event seen", func(t *testing.T) {
		b.t = t
		id := s.submit(t, "slowstream")
		b.open(s.gw.URL + "/#/runs/" + id)
		seen := waitFor[string](b, "a few streamed words", long,
			`(() => { const el = document.querySelector('.bubble.assistant.streaming .text');
			  return el && el.textContent.trim().split(/\s+/).length >= 3 ? document.getElementById('timeline').dataset.lastSeq : ''; })()`)
		s.gw.CloseClientConnections() // the browser's event stream breaks mid-run
		require.False(t, eval[bool](b, `!!document.querySelector('.ev.outcome')`), "the run finished before the cut: slow the slowstream agent down")

		final := waitFor[string](b, "the run to complete after the reconnect", long, finalText)
		require.Equal(t, slowStreamed, final)
		require.Equal(t, 1, eval[int](b, `document.querySelectorAll('.ev.outcome').length`), "one terminal event shown")
		require.Equal(t, 1, eval[int](b, `document.querySelectorAll('.ev.notice[data-type="run_started"]').length`), "run_started shown once")
		require.True(t, eval[bool](b, `(() => { const seqs = [...document.querySelectorAll('#timeline [data-seq]')].map((e) => +e.dataset.seq);
		  return seqs.every((s, i) => i === 0 || s >= seqs[i - 1]); })()`), "the events are shown in order, none twice")

		reqs := s.events.of(id)
		require.GreaterOrEqual(t, len(reqs), 2, "the console reconnected: %q", reqs)
		require.Empty(t, reqs[0], "the first stream starts at the first event")
		last, err := strconv.Atoi(reqs[len(reqs)-1])
		require.NoError(t, err, "the reconnect sent Last-Event-ID: %q", reqs)
		cut, _ := strconv.Atoi(seen)
		require.GreaterOrEqual(t, last, cut, "the reconnect resumed after the events shown before the cut (%q)", reqs)
	})

	t.Run("follows a run across a kill -9 of its worker", func(t *testing.T) {
		b.t = t
		id := s.submit(t, "talker")
		b.open(s.gw.URL + "/#/runs/" + id)
		b.visible("the start on the victim", `.ev.notice[data-type="run_started"]`, long)
		require.Contains(t, b.textOf(`.ev.notice[data-type="run_started"]`), "victim")

		s.fleet.StartWorker(worker.Config{Conn: s.fleet.Connect(), Catalog: s.fleet.Catalog, Registry: &loop.Registry{},
			ID: "survivor", SkipProvision: true})
		s.waitWorkers(t, "the survivor to announce itself", func(ids []string) bool { return contains(ids, "survivor") })
		waitFor[bool](b, "a few words streamed by the victim", long, wordsStreaming(3))
		require.NoError(t, s.victim.Process.Signal(syscall.SIGKILL))
		_, _ = s.victim.Process.Wait()
		require.False(t, eval[bool](b, `!!document.querySelector('.ev.outcome')`), "the run finished before the kill: slow the talker agent down")

		b.visible("run_resumed on the survivor", `.ev.resumed`, 60*time.Second)
		require.Contains(t, b.textOf(`.ev.resumed`), "survivor")
		b.present("the victim's half-streamed text discarded", `.ev.discarded`, long)
		final := waitFor[string](b, "the run's completion on the survivor", 60*time.Second, finalText)
		require.Equal(t, talked, final)
		require.Equal(t, 1, eval[int](b, `document.querySelectorAll('.bubble.assistant').length`),
			"the text streamed before the kill was cleared, not left beside the resumed answer")
		require.Equal(t, []string{"turn 1 · talker", "turn 1 again · talker"},
			eval[[]string](b, `[...document.querySelectorAll('.ev.turn')].map((e) => e.textContent)`), "the turn the kill cut short is tried again")
		b.visible("the completed chip", `#run-status .chip-completed`, long)
		b.screenshot("run-resumed")
	})

	t.Run("screenshots every page", func(t *testing.T) {
		b.t = t
		b.open(s.gw.URL + "/#/runs")
		b.visible("the runs list", `#runs-list tr[data-run-id="`+streamRun+`"]`, long)
		waitFor[bool](b, "the completed chip to count the finished runs", long, `+document.getElementById('count-completed').textContent >= 6`)
		b.screenshot("runs")
		b.do("filtering by a status chip", long, chromedp.Click(chromedp.CSS(`.chip-filter[data-status="running"]`)))
		b.visible("the empty list of running runs", `#runs-list .empty`, long)
		require.Contains(t, b.location(), "status=running", "the filter is in the address, to share or reload")

		b.open(s.gw.URL + "/#/sessions/" + streamSession)
		b.visible("the session's segment", `.segment[data-run-id="`+streamRun+`"]`, long)
		b.screenshot("session")

		b.open(s.gw.URL + "/#/agents")
		b.visible("the gated agent's append_file schema", `[data-agent="gated"] [data-tool="append_file"] details`, long)
		b.screenshot("agents")

		b.open(s.gw.URL + "/#/workers")
		b.visible("the survivor in the workers table", `#workers tr[data-worker="survivor"]`, long)
		b.screenshot("workers")
	})

	t.Run("pages and filters the runs list", func(t *testing.T) {
		b.t = t
		rows := `document.querySelectorAll('#runs-list tbody tr')`
		b.open(s.gw.URL + "/#/runs?limit=3")
		waitFor[bool](b, "a first page of 3 runs", long, rows+`.length === 3`)
		b.visible("the load-more button", "#runs-more", long)
		b.do("loading the next page", long, chromedp.Click(chromedp.CSS("#runs-more")))
		waitFor[bool](b, "the second page under the first", long, rows+`.length === 6`)
		require.Equal(t, 6, eval[int](b, `new Set([...`+rows+`].map((r) => r.dataset.runId)).size`), "no run twice across pages")

		b.open(s.gw.URL + "/#/runs?agent=gated")
		waitFor[bool](b, "the gated agent's runs only", long,
			`(() => { const r = [...`+rows+`]; return r.length > 0 && r.every((tr) => tr.children[1].textContent.startsWith('gated')); })()`)

		b.open(s.gw.URL + "/#/runs?since=" + time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
		b.visible("no run in a time range still to come", "#runs-list .empty", long)
		b.open(s.gw.URL + "/#/runs?since=yesterday")
		b.visible("the gateway's refusal of a bad time, with its hint", "#runs-list .error .hint", long)
		require.Contains(t, b.textOf("#runs-list .error"), "RFC 3339")
	})

	t.Run("renders odd and hostile events as text, without failing", func(t *testing.T) {
		b.t = t
		b.open(s.gw.URL + "/#/agents")
		type rendered struct {
			Text      string `json:"text"`
			Elements  int    `json:"elements"`
			Pwned     bool   `json:"pwned"`
			TodoShown bool   `json:"todo_shown"`
		}
		got := run(b, "feeding synthetic events to the timeline", long, chromedp.Evaluate[rendered](syntheticEvents, chromedp.EvalAwaitPromise))
		require.False(t, got.Pwned, "markup in event data never runs")
		require.Zero(t, got.Elements, "markup in event data is shown as text: no <img> or <script> element")
		require.Contains(t, got.Text, `<img src=x onerror="window.pwned=true">`)
		require.Contains(t, got.Text, "context compacted (threshold): 9000 → 1200 tokens, 40 → 6 entries")
		require.Contains(t, got.Text, "the summary so far")
		require.Contains(t, got.Text, "Timeout: took too long")
		require.Contains(t, got.Text, "retry with a smaller page")
		require.Contains(t, got.Text, "event something_new")
		require.Contains(t, got.Text, "event constructor")
		require.Contains(t, got.Text, "call gone approved")
		require.False(t, got.TodoShown, "a failed todo_write leaves the todo list as it was (none)")
	})

	t.Run("works from another origin", func(t *testing.T) {
		b.t = t
		b.open(s.other.URL + "/#/runs/" + streamRun)
		b.do("pointing the console at the gateway", long,
			chromedp.Click(chromedp.CSS("#settings-toggle")),
			chromedp.WaitVisible(chromedp.CSS("#settings-gateway")),
			chromedp.SetValue(chromedp.CSS("#settings-gateway"), s.gw.URL),
			chromedp.SetValue(chromedp.CSS("#settings-token"), token),
			chromedp.Click(chromedp.CSS("#settings-save")))
		final := waitFor[string](b, "the run's events over a cross-origin stream", long, finalText)
		require.Equal(t, streamed, final)
	})
}

// TestMissingChromiumFailsClearly: without a browser the tests fail with
// the command that installs one (findChromium fails, never skips).
func TestMissingChromiumFailsClearly(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("LOVIA_CHROMIUM", "")
	_, err := chromiumPath()
	require.ErrorContains(t, err, "apt-get install -y chromium")
}
