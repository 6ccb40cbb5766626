package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/gateway"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// truthAgents are the agents of TestConsoleSaysWhatIsSo: a gated write (it
// parks while it waits), a nap long enough to cancel, a short answer an
// injected message comes too late for.
const truthAgents = `
agents:
  - name: gated
    model: scripted
    tools: [append_file]
    approval: [append_file]
    script:
      - call: {name: append_file, args: {path: truth.txt, line: "approved"}, id: write1}
      - text: The note is written.
  - name: napper
    model: scripted
    tools: [sleep]
    script:
      - call: {name: sleep, args: {ms: 120000}, id: nap}
      - text: Awake.
  - name: dozer
    model: scripted
    tools: [sleep]
    script:
      - call: {name: sleep, args: {ms: 8000}, id: doze}
      - text: Rested.
  - name: streamer
    model: scripted
    script:
      - text: "Streaming one word at a time so that a message injected meanwhile comes too late for the only turn."
        delay_ms: 500
`

// heldReplies holds the gateway's replies to the requests hold names
// until the test lets them go: the browser gets the run's events first, as
// it does when a reply is slower than the event stream.
type heldReplies struct {
	mu      sync.Mutex
	match   func(*http.Request) bool
	before  bool // hold the request itself, not only its reply
	release chan struct{}
	refuse  func(*http.Request) bool // answered 503, as by a gateway that is down
}

// refuseWhile answers the matching requests 503 until the test calls the
// function it returns.
func (h *heldReplies) refuseWhile(match func(*http.Request) bool) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refuse = match
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.refuse = nil
	}
}

func (h *heldReplies) hold(match func(*http.Request) bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.match, h.before, h.release = match, false, make(chan struct{})
}

// holdRequests holds the matching requests before the gateway sees them.
func (h *heldReplies) holdRequests(match func(*http.Request) bool) {
	h.hold(match)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.before = true
}

// injects are the messages injected.
func injects(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/messages")
}

// approvals are the approve and reject requests.
func approvals(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/approvals/")
}

// statusReads are the reads of a run's status and description.
func statusReads(r *http.Request) bool {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/runs/")
	return ok && r.Method == http.MethodGet && (!strings.Contains(rest, "/") || strings.HasSuffix(rest, "/describe"))
}

func (h *heldReplies) let() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.release != nil {
		close(h.release)
		h.release = nil
	}
}

func (h *heldReplies) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		release, match, before, refuse := h.release, h.match, h.before, h.refuse
		h.mu.Unlock()
		if refuse != nil && refuse(r) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"type":"Unavailable","message":"the gateway is stopping","hint":"reconnect to another gateway"}}`))
			return
		}
		if release == nil || !match(r) {
			next.ServeHTTP(w, r)
			return
		}
		if before {
			select {
			case <-release:
				next.ServeHTTP(w, r)
			case <-r.Context().Done():
			}
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r) // the decision applies now; its reply waits
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

type truthStack struct {
	fleet *fleettest.Fleet
	gw    *httptest.Server
	held  *heldReplies
}

func setupTruth(t *testing.T) *truthStack {
	t.Helper()
	s := &truthStack{held: &heldReplies{}}
	s.fleet = fleettest.Start(t, fleettest.Options{AgentsYAML: truthAgents, Worker: func(c *worker.Config) {
		c.ParkAfter = time.Second // a wait for a decision parks at once
	}})
	gw, err := gateway.New(gateway.Config{API: s.fleet.API, Client: s.fleet.Client, Conn: s.fleet.Conn, Heartbeat: 2 * time.Second})
	require.NoError(t, err)
	s.gw = httptest.NewServer(s.held.wrap(gw.Handler()))
	t.Cleanup(s.gw.Close)
	return s
}

func (s *truthStack) submit(t *testing.T, agent, runID string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := s.fleet.Client.Submit(ctx, &bus.RunRequest{RunID: runID, Agent: agent, Input: bus.TextInput("go")})
	require.NoError(t, err)
	return rep.RunID
}

// waitParked polls the run's history until it parked.
func (s *truthStack) waitParked(t *testing.T, runID string) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	var kinds []string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		d, err := s.fleet.API.DescribeRun(ctx, runID)
		cancel()
		if err == nil {
			kinds = kinds[:0]
			for _, a := range d.Attempts {
				kinds = append(kinds, a.Kind)
			}
			if slices.Contains(kinds, "park") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 45s for run %s to park: its steps %v, last error %v", runID, kinds, err)
		}
		time.Sleep(100 * time.Millisecond) // polling the run's record, with a deadline
	}
}

// cardState is the state a tool call's card shows.
func cardState(callID string) string {
	return `(() => { const c = document.querySelector('.tool[data-call-id="` + callID + `"]');
	  return c ? c.dataset.state + ': ' + c.querySelector('.tool-state').textContent : ''; })()`
}

// TestConsoleSaysWhatIsSo: what the console shows of a run is what its
// events say — a late approve reply, a cancel, a park and its resume, an
// unknown run, an injected message no turn took, the turns in the list.
func TestConsoleSaysWhatIsSo(t *testing.T) {
	s := setupTruth(t)
	artifacts := os.Getenv("LOVIA_ARTIFACTS")
	if artifacts == "" {
		artifacts = t.TempDir()
	}
	b := newBrowser(t, artifacts)
	const long = 45 * time.Second

	var gatedRun string
	t.Run("an approve reply slower than the events leaves the call done", func(t *testing.T) {
		b.t = t
		gatedRun = s.submit(t, "gated", "")
		b.open(s.gw.URL + "/#/runs/" + gatedRun)
		card := `.tool[data-call-id="write1"]`
		b.visible("the approve button", card+" button.approve", long)
		// The park (after 1s) and its resume are the next subtest's.
		s.waitParked(t, gatedRun)
		s.held.hold(approvals)
		t.Cleanup(s.held.let)
		b.do("clicking approve", long, chromedp.Click(chromedp.CSS(card+" button.approve")))
		b.visible("the run's completion, the approve reply still held", `.ev.outcome.completed`, long)
		b.visible("the call's result", card+" .tool-result", long)
		s.held.let()
		// The page took the reply once it recorded it (data-sent), or once
		// the reply overwrote the card (what it did before).
		waitFor[bool](b, "the page to take the approve reply", long,
			`performance.getEntriesByType('resource').some((e) => e.name.includes('/approvals/write1') && e.responseEnd > 0) &&
			 (document.querySelector('`+card+`').dataset.sent === 'approve' || document.querySelector('`+card+` .tool-state').textContent === 'approved, running')`)
		require.Equal(t, "done: done", eval[string](b, cardState("write1")), "the call's result stands after the late reply")
		require.Empty(t, eval[string](b, `document.querySelector('`+card+` .actions').textContent`), "no buttons on a decided call")
	})

	t.Run("a park and its resume discard nothing and repeat no turn", func(t *testing.T) {
		b.t = t
		b.open(s.gw.URL + "/#/runs/" + gatedRun)
		b.visible("the run's completion", `.ev.outcome.completed`, long)
		b.present("the resume after the park", `.ev.resumed`, long)
		t.Logf("the run's events: %s", eval[string](b, `document.getElementById('timeline').dataset.types`))
		require.Zero(t, eval[int](b, `document.querySelectorAll('.ev.discarded').length`), "nothing streamed was discarded: no notice says so")
		require.Equal(t, []string{"turn 1 · gated", "turn 2 · gated"},
			eval[[]string](b, `[...document.querySelectorAll('.ev.turn')].map((e) => e.textContent)`), "each turn shown once")
		require.Equal(t, "done: done", eval[string](b, cardState("write1")))
		require.Equal(t, 1, eval[int](b, `document.querySelectorAll('.tool[data-call-id="write1"] .decision').length`), "one decision shown")
	})

	t.Run("the attempt shown is the resume's, not a slower status reply's", func(t *testing.T) {
		b.t = t
		id := s.submit(t, "gated", "")
		b.open(s.gw.URL + "/#/runs/" + id)
		card := `.tool[data-call-id="write1"]`
		b.visible("the approve button", card+" button.approve", long)
		waitFor[bool](b, "the first attempt in the facts", long, `document.querySelector('[data-fact="attempt"] dd')?.textContent === '1'`)
		s.waitParked(t, id)
		s.held.hold(statusReads)
		t.Cleanup(s.held.let)
		b.do("approving the parked call", long, chromedp.Click(chromedp.CSS(card+" button.approve")))
		b.visible("the run's completion, the status replies held", `.ev.outcome.completed`, long)
		b.present("the resume", `.ev.resumed`, long)
		require.Equal(t, "2", b.textOf(`[data-fact="attempt"] dd`), "the resume is the second attempt")
		require.Equal(t, "w1", b.textOf(`[data-fact="worker"] dd`))
		s.held.let()
	})

	t.Run("a rejected call stays rejected after its refusal", func(t *testing.T) {
		b.t = t
		id := s.submit(t, "gated", "")
		b.open(s.gw.URL + "/#/runs/" + id)
		card := `.tool[data-call-id="write1"]`
		b.visible("the reject button", card+" button.reject", long)
		b.do("rejecting with a reason", long,
			chromedp.SetValue(chromedp.CSS(card+" input.reason"), "not now"),
			chromedp.Click(chromedp.CSS(card+" button.reject")))
		b.visible("the run's completion", `.ev.outcome.completed`, long)
		b.visible("the refusal as the call's result", card+" .tool-result.is-error", long)
		require.Equal(t, "rejected: rejected", eval[string](b, cardState("write1")), "the refusal is the rejection, not an error of the tool")
		require.Equal(t, "rejected: not now", b.textOf(card+" .decision"))
	})

	var napRun string
	t.Run("a cancelled run's call in flight is cancelled, not running", func(t *testing.T) {
		b.t = t
		napRun = s.submit(t, "napper", "")
		b.open(s.gw.URL + "/#/runs/" + napRun)
		b.visible("the nap running", `.tool[data-call-id="nap"][data-state="running"]`, long)
		b.do("cancelling", long,
			chromedp.Click(chromedp.CSS("#cancel")),
			chromedp.WaitVisible(chromedp.CSS("#cancel-confirm")),
			chromedp.Click(chromedp.CSS("#cancel-confirm")))
		b.visible("the run's failure", `.ev.outcome.failed`, long)
		require.Equal(t, "cancelled: cancelled with the run", eval[string](b, cardState("nap")))
		waitFor[bool](b, "the turns fact", long, `document.querySelector('[data-fact="turns"] dd')?.textContent === '1'`)
	})

	t.Run("the runs list shows no turn count the run page denies", func(t *testing.T) {
		b.t = t
		b.open(s.gw.URL + "/#/runs")
		const turns = ` td:nth-child(5)` // run, agent, status, worker, turns
		napRow := `#runs-list tr[data-run-id="` + napRun + `"]` + turns
		gatedRow := `#runs-list tr[data-run-id="` + gatedRun + `"]` + turns
		b.visible("the cancelled run's row", napRow, long)
		require.NotEqual(t, "0", b.textOf(napRow), "the cancelled run took a turn")
		require.Equal(t, "2", b.textOf(gatedRow), "a completed run's turns")
	})

	t.Run("an unknown run says so and offers no controls", func(t *testing.T) {
		b.t = t
		const id = "not-yet-submitted"
		b.open(s.gw.URL + "/#/runs/" + id)
		waitFor[bool](b, "the stream state to say there is no run (not to stay connecting)", long,
			`document.getElementById('stream-state').textContent === 'no such run'`)
		b.visible("the not-found message", "#run-missing .error", long)
		require.Contains(t, b.textOf("#run-missing"), "not found")
		require.Contains(t, b.textOf("#run-missing"), "check the id")
		require.False(t, eval[bool](b, `!!document.querySelector('#inject, #cancel') && !document.getElementById('run-controls').closest('[hidden]')`),
			"no Inject or Cancel for a run that does not exist")

		// A run submitted with that id later shows up by itself.
		s.submit(t, "streamer", id)
		b.visible("the run's completion, once it exists", `.ev.outcome.completed`, long)
		require.True(t, eval[bool](b, `document.getElementById('run-missing').hidden`))

		b.open(s.gw.URL + "/#/runs/a.b")
		b.visible("the refusal of a bad id", "#run-missing .error", long)
		require.Contains(t, b.textOf("#run-missing"), "is not a run id")
		require.False(t, eval[bool](b, `!!document.querySelector('#inject, #cancel')`), "no controls")
	})

	t.Run("a failed run's page follows its resubmission", func(t *testing.T) {
		b.t = t
		id := s.submit(t, "dozer", "")
		b.open(s.gw.URL + "/#/runs/" + id)
		b.visible("the doze running", `.tool[data-call-id="doze"][data-state="running"]`, long)
		b.do("injecting a message for the next turn", long,
			chromedp.SetValue(chromedp.CSS("#inject-text"), "and then wake up"),
			chromedp.Click(chromedp.CSS(`#inject button[type="submit"]`)))
		b.visible("the queued message", `#inject-pending .badge.pending`, long)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := s.fleet.Client.Cancel(ctx, id, "try again later")
		require.NoError(t, err)
		b.visible("the first submission's failure", `.ev.outcome.failed`, long)
		require.Contains(t, b.textOf(`#timeline`), "message not delivered: “and then wake up”")
		b.visible("the failed chip", `#run-status .chip-failed`, long)

		_, err = s.fleet.Client.Submit(ctx, &bus.RunRequest{RunID: id, Agent: "dozer", IfRunExists: bus.IfExistsResume})
		require.NoError(t, err)
		b.visible("the resubmission's completion, on the page left open", `.ev.outcome.completed`, long)
		b.visible("the completed chip", `#run-status .chip-completed`, long)
		require.Equal(t, "done: done", eval[string](b, cardState("doze")))
		require.Contains(t, b.textOf(`#timeline`), "message delivered later, in turn 2: “and then wake up”")

		b.reload()
		b.visible("both submissions' outcomes after a reload", `.ev.outcome.completed`, long)
		require.Equal(t, 2, eval[int](b, `document.querySelectorAll('.ev.outcome').length`))
		b.visible("the completed chip after a reload", `#run-status .chip-completed`, long)
	})

	t.Run("the status follows the terminal event, not a slower status reply", func(t *testing.T) {
		b.t = t
		id := s.submit(t, "streamer", "")
		b.open(s.gw.URL + "/#/runs/" + id)
		b.visible("the running chip", `#run-status .chip-running`, long)
		waitFor[bool](b, "a few streamed words", long, wordsStreaming(2))
		s.held.hold(statusReads)
		t.Cleanup(s.held.let)
		b.visible("the run's completion, the status replies held", `.ev.outcome.completed`, long)
		require.Equal(t, "completed", b.textOf(`#run-status .chip`), "the chip says what the terminal event says")
		require.True(t, eval[bool](b, `document.getElementById('run-controls').hidden`), "no controls on an ended run")
		require.Equal(t, "1", b.textOf(`[data-fact="turns"] dd`))
		s.held.let()
	})

	t.Run("what the controls answer as the run ends is still shown", func(t *testing.T) {
		b.t = t
		id := s.submit(t, "streamer", "")
		b.open(s.gw.URL + "/#/runs/" + id)
		waitFor[bool](b, "a few streamed words", long, wordsStreaming(2))
		b.do("injecting a blank message", long,
			chromedp.SetValue(chromedp.CSS("#inject-text"), "   "),
			chromedp.Click(chromedp.CSS(`#inject button[type="submit"]`)))
		b.visible("the refusal of a blank message", `#control-result .error`, long)
		require.Contains(t, b.textOf(`#control-result`), "the message is empty")
		require.Zero(t, eval[int](b, `document.querySelectorAll('#inject-pending .badge').length`), "nothing queued")

		// The inject reaches the gateway once the run has ended: it is
		// refused, and the refusal shows although the controls are gone.
		s.held.holdRequests(injects)
		t.Cleanup(s.held.let)
		b.do("injecting a message", long,
			chromedp.SetValue(chromedp.CSS("#inject-text"), "too late"),
			chromedp.Click(chromedp.CSS(`#inject button[type="submit"]`)))
		b.visible("the run's completion, the inject held", `.ev.outcome.completed`, long)
		s.held.let()
		b.visible("the refusal of the late inject", `#control-result .error`, long)
		require.Contains(t, b.textOf(`#control-result`), "The message was not injected")
		require.Contains(t, b.textOf(`#control-result`), "is completed")
	})

	t.Run("a withdrawn message is not reported undelivered", func(t *testing.T) {
		b.t = t
		id := s.submit(t, "dozer", "")
		b.open(s.gw.URL + "/#/runs/" + id)
		b.visible("the doze running", `.tool[data-call-id="doze"][data-state="running"]`, long)
		b.do("injecting a message", long,
			chromedp.SetValue(chromedp.CSS("#inject-text"), "never mind"),
			chromedp.Click(chromedp.CSS(`#inject button[type="submit"]`)))
		b.do("withdrawing it", long, chromedp.Click(chromedp.CSS(`#inject-pending .badge.pending button`)))
		b.visible("the run's completion", `.ev.outcome.completed`, long)
		require.Zero(t, eval[int](b, `document.querySelectorAll('.ev.undelivered, .bubble.injected').length`), "a withdrawn message was neither lost nor delivered")
	})

	t.Run("a run page opened while the gateway cannot answer says so, then follows the run", func(t *testing.T) {
		b.t = t
		id := s.submit(t, "streamer", "")
		answer := s.held.refuseWhile(statusReads)
		t.Cleanup(answer)
		b.open(s.gw.URL + "/#/runs/" + id)
		waitFor[bool](b, "the stream state to say it waits for the gateway (not to stay connecting)", long,
			`document.getElementById('stream-state').textContent.startsWith('waiting for the gateway')`)
		require.Contains(t, b.textOf("#run-facts"), "Reading the status failed")
		answer()
		b.visible("the run's completion once the gateway answers", `.ev.outcome.completed`, long)
	})

	t.Run("an injected message no turn took is reported, not dropped", func(t *testing.T) {
		b.t = t
		id := s.submit(t, "streamer", "")
		b.open(s.gw.URL + "/#/runs/" + id)
		waitFor[bool](b, "a few streamed words", long, wordsStreaming(2))
		const msg = `<b>also</b> mention the weather`
		b.do("injecting a message with a double click", long,
			chromedp.SetValue(chromedp.CSS("#inject-text"), msg),
			chromedp.Evaluate[chromedp.Void](`(() => { const b = document.querySelector('#inject button[type="submit"]'); b.click(); b.click(); })()`))
		b.visible("the run's completion", `.ev.outcome.completed`, long)
		require.Contains(t, b.textOf(`#timeline`), "message not delivered: “"+msg+"”")
		require.Equal(t, 1, eval[int](b, `document.querySelectorAll('.ev.undelivered').length`), "a double click injects one message")
		require.Zero(t, eval[int](b, `document.querySelectorAll('.ev.undelivered b').length`), "markup in a message is text")

		b.reload()
		b.visible("the run's completion after a reload", `.ev.outcome.completed`, long)
		b.visible("the message still reported undelivered after a reload", `.ev.undelivered`, long)
		require.Contains(t, b.textOf(`.ev.undelivered`), msg)
		b.do("withdrawing it", long, chromedp.Click(chromedp.CSS(`.ev.undelivered button.withdraw`)))
		b.visible("the withdrawal", `.ev.undelivered .badge`, long)
		require.Equal(t, "withdrawn", b.textOf(`.ev.undelivered .badge`))
		b.reload()
		b.visible("the run's completion after another reload", `.ev.outcome.completed`, long)
		require.Zero(t, eval[int](b, `document.querySelectorAll('.ev.undelivered').length`), "a withdrawn message is not reported again")
	})

	t.Run("a message a turn took before its inject reply came is delivered", func(t *testing.T) {
		b.t = t
		id := s.submit(t, "dozer", "")
		b.open(s.gw.URL + "/#/runs/" + id)
		b.visible("the doze running", `.tool[data-call-id="doze"][data-state="running"]`, long)
		s.held.hold(injects)
		t.Cleanup(s.held.let)
		b.do("injecting a message", long,
			chromedp.SetValue(chromedp.CSS("#inject-text"), "wake up gently"),
			chromedp.Click(chromedp.CSS(`#inject button[type="submit"]`)))
		b.visible("the run's completion, the inject reply held", `.ev.outcome.completed`, long)
		b.visible("the message folded into the run", `.bubble.injected`, long)
		s.held.let()
		waitFor[bool](b, "the page to take the inject reply", long,
			`performance.getEntriesByType('resource').some((e) => e.name.endsWith('/messages') && e.responseEnd > 0) &&
			 !document.querySelector('#inject button[type="submit"]').disabled`)
		require.Zero(t, eval[int](b, `document.querySelectorAll('#inject-pending .badge.pending, .ev.undelivered').length`),
			"the message was delivered: not queued, not undelivered")
		require.True(t, eval[bool](b, `localStorage.getItem('lovia.console.pending.`+id+`') === null`), "nothing left to track")
	})
}
