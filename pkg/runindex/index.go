package runindex

import (
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// Await is what a run waits for: a decision on a gated call.
type Await struct {
	// CallKey is the call's key token in the run index bucket; CallID the
	// call's id.
	CallKey, CallID string
	Deadline        time.Time
	// Parked is set when the run waits parked, on no worker.
	Parked bool
	// Tool and Question are the gated tool and ask_human's question, once
	// known (SetCallInfo).
	Tool, Question string
}

// Run is one run of a listing: its record as the index holds it (no
// result, metadata, history or parked request) and what it awaits.
type Run struct {
	Record   store.RunRecord
	Awaiting *Await
}

// Query filters and pages a listing. Empty fields do not filter.
type Query struct {
	Agent, Session, Worker, Parent string
	// Schedule keeps the fires of this schedule: the runs whose id is
	// bus.ScheduledRunIDAt(Schedule, some slot).
	Schedule string
	// Statuses keeps runs in any of them.
	Statuses []store.RunStatus
	// Since ≤ created_at < Until.
	Since, Until time.Time
	// Awaiting keeps runs that wait for a decision.
	Awaiting bool
	// Limit is the page size (at least 1).
	Limit int
	// Cursor is a Page's Next: the page after it.
	Cursor string
}

// Page is one page of a listing, newest first.
type Page struct {
	Runs []Run
	// Next is the cursor of the next page, "" on the last.
	Next string
	// Counts counts the runs matching every filter but Statuses.
	Counts map[store.RunStatus]int
	// Horizon, when not zero, is the created_at of the newest ended run
	// the index dropped for its cap (NewBounded): ended runs created at or
	// before it may be missing from the listing and its counts (read one
	// with its run id: the run index bucket keeps it until its retention
	// expires it).
	Horizon time.Time
}

type ask struct {
	callID     string
	deadline   time.Time
	submission int
}

type callInfo struct{ tool, question string }

// entry is one run in the index.
type entry struct {
	key key
	rec store.RunRecord
	// calls caches the tool and question of the run's gated calls, by
	// call key.
	calls map[string]callInfo
}

// Index is the in-memory run index: every run's summary, ordered by
// (created_at, run_id) in one set, with a set per status, agent, session,
// worker and parent run, and the set of runs that may await a decision.
// It is safe for concurrent use: Apply takes a write lock, queries a read
// lock.
type Index struct {
	mu       sync.RWMutex
	runs     map[string]*entry
	all      set
	statuses map[store.RunStatus]*set
	agents   postings
	sessions postings
	workers  postings
	parents  postings
	// waiting holds the runs that are parked or running with an
	// undecided approval wait of their current submission; a query checks
	// the deadline.
	waiting   map[*entry]struct{}
	asks      map[string]map[string]ask // run → call key → wait
	decisions map[string]map[string]int // run → call key → submission
	// max caps the ended runs held (0: no cap); see NewBounded.
	max int
	// evicted counts the ended runs dropped for the cap; horizon is the
	// newest key dropped.
	evicted int
	horizon key
}

// DefaultMaxRuns is the number of ended runs a Feed's index holds by
// default: past it the oldest leave the memory (see NewBounded).
const DefaultMaxRuns = 200_000

// New returns an empty index with no cap.
func New() *Index { return NewBounded(0) }

// NewBounded returns an empty index that holds at most about max ended
// runs (0: no cap): once it holds an eighth more, the oldest ended runs
// (completed or failed, by created_at) leave it, down to max. Queued,
// running and parked runs are never dropped: they are as many as the
// fleet runs or keeps waiting at once. A dropped run is still in the run index
// bucket until its retention expires it: read it with store.Runs.Get (see
// Feed.Lookup). Page.Horizon says which listings may miss dropped runs.
func NewBounded(max int) *Index {
	return &Index{
		runs: map[string]*entry{}, statuses: map[store.RunStatus]*set{},
		agents: postings{}, sessions: postings{}, workers: postings{}, parents: postings{},
		waiting: map[*entry]struct{}{}, asks: map[string]map[string]ask{}, decisions: map[string]map[string]int{},
		max: max,
	}
}

// Evicted is the number of ended runs the index dropped for its cap.
func (x *Index) Evicted() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.evicted
}

// evict drops the oldest ended runs down to the cap, once the index holds
// an eighth more ended runs than it (one pass over the sets for many runs).
func (x *Index) evict() {
	done, failed := x.statuses[store.RunCompleted].list(), x.statuses[store.RunFailed].list()
	ended := len(done) + len(failed)
	if x.max <= 0 || ended <= x.max+x.max/8 {
		return
	}
	need := ended - x.max
	gone := make(map[*entry]struct{}, need)
	i, j := 0, 0
	for len(gone) < need && (i < len(done) || j < len(failed)) {
		var e *entry
		if j >= len(failed) || i < len(done) && done[i].key.less(failed[j].key) {
			e, i = done[i], i+1
		} else {
			e, j = failed[j], j+1
		}
		gone[e] = struct{}{}
		if x.horizon.less(e.key) {
			x.horizon = e.key
		}
	}
	if len(gone) == 0 {
		return
	}
	keep := func(s *set) {
		if s == nil {
			return
		}
		out := s.es[:0]
		for _, e := range s.es {
			if _, ok := gone[e]; !ok {
				out = append(out, e)
			}
		}
		clear(s.es[len(out):])
		s.es = out
	}
	keep(&x.all)
	keep(x.statuses[store.RunCompleted])
	keep(x.statuses[store.RunFailed])
	touched := map[*set]struct{}{}
	for e := range gone {
		for _, p := range []struct {
			p postings
			v string
		}{{x.agents, e.rec.Agent}, {x.sessions, e.rec.SessionID}, {x.workers, e.rec.Worker}, {x.parents, e.rec.ParentRunID}} {
			if s := p.p[p.v]; s != nil {
				touched[s] = struct{}{}
			}
		}
		delete(x.runs, e.rec.RunID)
		delete(x.waiting, e)
		delete(x.asks, e.rec.RunID)
		delete(x.decisions, e.rec.RunID)
	}
	for s := range touched {
		keep(s)
	}
	for _, p := range []postings{x.agents, x.sessions, x.workers, x.parents} {
		for v, s := range p {
			if len(s.es) == 0 {
				delete(p, v)
			}
		}
	}
	x.evicted += len(gone)
}

// Len is the number of runs indexed.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.runs)
}

// Apply folds one change of the run index bucket into the index.
func (x *Index) Apply(c store.RunChange) {
	x.mu.Lock()
	defer x.mu.Unlock()
	switch c.Kind {
	case store.ChangeRecord:
		if c.Deleted || c.Record == nil {
			x.removeRun(c.RunID)
			return
		}
		x.putRecord(c.Record)
		x.evict()
	case store.ChangeAsk:
		if c.Deleted {
			delete(x.asks[c.RunID], c.CallKey)
		} else {
			m := x.asks[c.RunID]
			if m == nil {
				m = map[string]ask{}
				x.asks[c.RunID] = m
			}
			m[c.CallKey] = ask{callID: c.CallID, deadline: c.Deadline, submission: c.Submission}
		}
	case store.ChangeDecision:
		if c.Deleted {
			delete(x.decisions[c.RunID], c.CallKey)
		} else {
			m := x.decisions[c.RunID]
			if m == nil {
				m = map[string]int{}
				x.decisions[c.RunID] = m
			}
			m[c.CallKey] = c.Submission
		}
	default:
		return
	}
	if e := x.runs[c.RunID]; e != nil {
		x.rewait(e)
	}
}

func (x *Index) putRecord(r *store.RunRecord) {
	k := key{created: r.CreatedAt.UnixNano(), id: r.RunID}
	e := x.runs[r.RunID]
	if e != nil && e.key != k {
		x.removeRun(r.RunID) // re-created: a new place in the order
		e = nil
	}
	if e == nil {
		e = &entry{key: k, rec: *r}
		x.runs[r.RunID] = e
		x.all.insert(e)
		x.statusSet(r.Status).insert(e)
		x.agents.add(r.Agent, e)
		x.sessions.add(r.SessionID, e)
		x.workers.add(r.Worker, e)
		x.parents.add(r.ParentRunID, e)
	} else {
		old := e.rec
		if old.Status != r.Status {
			x.statusSet(old.Status).remove(e)
			x.statusSet(r.Status).insert(e)
		}
		move(x.agents, old.Agent, r.Agent, e)
		move(x.sessions, old.SessionID, r.SessionID, e)
		move(x.workers, old.Worker, r.Worker, e)
		move(x.parents, old.ParentRunID, r.ParentRunID, e)
		e.rec = *r
	}
	if r.Status.Ended() {
		// Its waits are over; a later submission's are stored again.
		delete(x.asks, r.RunID)
		delete(x.decisions, r.RunID)
		e.calls = nil
	}
	x.rewait(e)
}

func move(p postings, from, to string, e *entry) {
	if from != to {
		p.drop(from, e)
		p.add(to, e)
	}
}

func (x *Index) removeRun(id string) {
	e := x.runs[id]
	if e == nil {
		return
	}
	delete(x.runs, id)
	x.all.remove(e)
	x.statusSet(e.rec.Status).remove(e)
	x.agents.drop(e.rec.Agent, e)
	x.sessions.drop(e.rec.SessionID, e)
	x.workers.drop(e.rec.Worker, e)
	x.parents.drop(e.rec.ParentRunID, e)
	delete(x.waiting, e)
	delete(x.asks, id)
	delete(x.decisions, id)
}

func (x *Index) statusSet(s store.RunStatus) *set {
	st := x.statuses[s]
	if st == nil {
		st = &set{}
		x.statuses[s] = st
	}
	return st
}

// rewait updates e's membership of the waiting set.
func (x *Index) rewait(e *entry) {
	if x.mayAwait(e) {
		x.waiting[e] = struct{}{}
	} else {
		delete(x.waiting, e)
	}
}

func (x *Index) mayAwait(e *entry) bool {
	switch e.rec.Status {
	case store.RunParked:
		return e.rec.Parked != nil
	case store.RunRunning:
		sub := max(e.rec.Submissions, 1)
		for k, a := range x.asks[e.rec.RunID] {
			if a.submission == sub && x.decisions[e.rec.RunID][k] != sub {
				return true
			}
		}
	}
	return false
}

// awaitOf is what e waits for at now, or nil.
func (x *Index) awaitOf(e *entry, now time.Time) *Await {
	if _, ok := x.waiting[e]; !ok {
		return nil
	}
	var out *Await
	if e.rec.Status == store.RunParked && e.rec.Parked != nil {
		p := e.rec.Parked
		out = &Await{CallKey: callKeyOf(p.CallID), CallID: p.CallID, Deadline: p.Deadline, Parked: true}
	} else {
		sub := max(e.rec.Submissions, 1)
		for k, a := range x.asks[e.rec.RunID] {
			if a.submission != sub || x.decisions[e.rec.RunID][k] == sub || !a.deadline.After(now) {
				continue
			}
			if out == nil || a.deadline.Before(out.Deadline) || a.deadline.Equal(out.Deadline) && k < out.CallKey {
				out = &Await{CallKey: k, CallID: a.callID, Deadline: a.deadline}
			}
		}
	}
	if out != nil {
		if ci, ok := e.calls[out.CallKey]; ok {
			out.Tool, out.Question = ci.tool, ci.question
		}
	}
	return out
}

// SetCallInfo records the tool and question of a run's gated call, which
// the run's events name (the bucket does not): awaiting entries show them
// from then on.
func (x *Index) SetCallInfo(runID, callID, tool, question string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.runs[runID]
	if e == nil {
		return
	}
	if e.calls == nil {
		e.calls = map[string]callInfo{}
	}
	e.calls[callKeyOf(callID)] = callInfo{tool: tool, question: question}
}

// Get returns one run as the index holds it.
func (x *Index) Get(runID string, now time.Time) (Run, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	e := x.runs[runID]
	if e == nil {
		return Run{}, false
	}
	return Run{Record: e.rec, Awaiting: x.awaitOf(e, now)}, true
}

// Query answers a listing at now (which decides whose approval deadline
// has passed). It fails only with ErrBadCursor.
func (x *Index) Query(q Query, now time.Time) (Page, error) {
	var after *key
	if q.Cursor != "" {
		k, err := decodeCursor(q.Cursor)
		if err != nil {
			return Page{}, err
		}
		after = &k
	}
	limit := max(q.Limit, 1)
	x.mu.RLock()
	defer x.mu.RUnlock()
	page := Page{Counts: map[store.RunStatus]int{}}
	if x.evicted > 0 {
		page.Horizon = time.Unix(0, x.horizon.created).UTC()
	}
	for _, s := range []store.RunStatus{store.RunQueued, store.RunRunning, store.RunParked, store.RunCompleted, store.RunFailed} {
		page.Counts[s] = 0
	}
	wantStatus := func(s store.RunStatus) bool {
		if len(q.Statuses) == 0 {
			return true
		}
		for _, w := range q.Statuses {
			if w == s {
				return true
			}
		}
		return false
	}
	// The candidates: the smallest set a filter names.
	var base []*entry
	fieldFilter := false
	pick := func(p postings, v string) {
		if v == "" {
			return
		}
		s := p[v]
		if !fieldFilter || s.len() < len(base) {
			base = nil
			if s != nil {
				base = s.es
			}
		}
		fieldFilter = true
	}
	pick(x.agents, q.Agent)
	pick(x.sessions, q.Session)
	pick(x.workers, q.Worker)
	pick(x.parents, q.Parent)
	if q.Schedule != "" && !fieldFilter {
		base, fieldFilter = x.all.es, true // no postings: every run is a candidate
	}
	if q.Awaiting && (!fieldFilter || len(x.waiting) < len(base)) {
		base = make([]*entry, 0, len(x.waiting))
		for e := range x.waiting {
			base = append(base, e)
		}
		sort.Slice(base, func(i, j int) bool { return base[i].key.less(base[j].key) })
		fieldFilter = true
	}
	if !fieldFilter {
		base = x.all.es
	}
	lo, hi := 0, len(base)
	if !q.Since.IsZero() {
		lo = searchIn(base, key{created: q.Since.UnixNano()})
	}
	if !q.Until.IsZero() {
		hi = searchIn(base, key{created: q.Until.UnixNano()})
	}
	match := func(e *entry) (*Await, bool) {
		r := &e.rec
		if q.Agent != "" && r.Agent != q.Agent || q.Session != "" && r.SessionID != q.Session ||
			q.Worker != "" && r.Worker != q.Worker || q.Parent != "" && r.ParentRunID != q.Parent ||
			q.Schedule != "" && !firedBy(r.RunID, q.Schedule) {
			return nil, false
		}
		if !q.Awaiting {
			return nil, true
		}
		a := x.awaitOf(e, now)
		return a, a != nil
	}
	// Without a field filter, counts come from the status sets (a binary
	// search each for a time range), and the page stops once full.
	fast := !fieldFilter
	if fast {
		for s := range page.Counts {
			st := x.statuses[s]
			if st == nil {
				continue
			}
			a, b := 0, len(st.es)
			if !q.Since.IsZero() {
				a = st.search(key{created: q.Since.UnixNano()})
			}
			if !q.Until.IsZero() {
				b = st.search(key{created: q.Until.UnixNano()})
			}
			page.Counts[s] = max(b-a, 0)
		}
	}
	start := hi
	if after != nil {
		start = min(hi, searchIn(base, *after))
	}
	if fast && len(q.Statuses) == 1 {
		// One status: walk its set only.
		st := x.statuses[q.Statuses[0]]
		base, lo, start = nil, 0, 0
		if st != nil {
			base = st.es
			if !q.Since.IsZero() {
				lo = st.search(key{created: q.Since.UnixNano()})
			}
			start = len(base)
			if !q.Until.IsZero() {
				start = st.search(key{created: q.Until.UnixNano()})
			}
			if after != nil {
				start = min(start, st.search(*after))
			}
		}
	}
	more := false
	if !fast {
		// Count every candidate in range; collect the page on the way.
		for i := hi - 1; i >= lo; i-- {
			e := base[i]
			a, ok := match(e)
			if !ok {
				continue
			}
			page.Counts[e.rec.Status]++
			if i >= start || !wantStatus(e.rec.Status) {
				continue
			}
			if len(page.Runs) == limit {
				more = true
				continue
			}
			page.Runs = append(page.Runs, x.runOf(e, a, q.Awaiting, now))
		}
	} else {
		for i := start - 1; i >= lo; i-- {
			e := base[i]
			if !wantStatus(e.rec.Status) {
				continue
			}
			if len(page.Runs) == limit {
				more = true
				break
			}
			page.Runs = append(page.Runs, x.runOf(e, nil, false, now))
		}
	}
	if more {
		last := page.Runs[len(page.Runs)-1].Record
		page.Next = encodeCursor(key{created: last.CreatedAt.UnixNano(), id: last.RunID})
	}
	return page, nil
}

func (x *Index) runOf(e *entry, a *Await, known bool, now time.Time) Run {
	if !known {
		a = x.awaitOf(e, now)
	}
	return Run{Record: e.rec, Awaiting: a}
}

func searchIn(es []*entry, k key) int {
	return sort.Search(len(es), func(i int) bool { return !es[i].key.less(k) })
}

// callKeyOf is the key token of a call id, as store.Control writes it.
func callKeyOf(callID string) string { return store.CallKeyOf(callID) }

// firedBy reports whether runID is a fire of the schedule name:
// sched-<name>-<unix seconds>, so that schedule "a" does not take the
// fires of schedule "a-1".
func firedBy(runID, name string) bool {
	rest, ok := strings.CutPrefix(runID, bus.ScheduledRunIDPrefix+name+"-")
	if !ok || rest == "" {
		return false
	}
	for _, c := range rest {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
