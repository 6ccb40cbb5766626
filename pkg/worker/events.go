package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// eventSink turns the loop's events into the run's published events:
// run_started or run_resumed for the loop's RunStarted, output_discarded
// when a resumed turn was in flight. Events are published pipelined: their
// acks are awaited (a flush) before every checkpoint write (eventsFirst),
// so a fact is in the stream before the loop checkpoints it and moves on,
// and before the run is settled; besides, only where a stop must come at
// once (a claimed run's first event, a resume, an approval request, the
// terminal event).
type eventSink struct {
	w        *Worker
	d        *delivery
	rp       *bus.RunPublisher
	runID    string
	agent    string
	parent   string   // the parent run id, for run_started
	versions versions // for run_started and run_resumed
	attempt  int
	last     *bus.Envelope // the stream's last event before this claim
	replay   bool
	terminal bool
	// seen is true once the loop produced any event (a run that fails
	// before RunStarted produces none).
	seen   bool
	fenced bool
	err    error
	turnT0 time.Time
	toolT0 map[string]time.Time
	// pubCtx is the run's context without its cancellation (shielded).
	pubCtx context.Context
	askT0  map[string]time.Time // approval_required, by call

	// Delta coalescing (Config.CoalesceDeltas > 0): consecutive text (or
	// reasoning) deltas are sent as one event when CoalesceDeltas passed
	// since the first of them, when 512 bytes gathered, or before any other
	// event. Their concatenation is unchanged.
	coalesce time.Duration
	mu       sync.Mutex
	pendKind loop.EventType
	pendHdr  loop.EventHeader
	pend     strings.Builder
	timer    *time.Timer
	closed   bool
}

// maxCoalesced is the size at which gathered deltas are sent at once.
const maxCoalesced = 512

// publish sends an event, coalescing deltas when configured; false stops
// the stream (publishing failed).
func (s *eventSink) publish(ctx context.Context, ev loop.Event) bool {
	if s.coalesce <= 0 {
		return s.publishOne(ctx, ev)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch e := ev.(type) {
	case *loop.TextDelta:
		return s.gather(ctx, loop.EventTextDelta, e.EventHeader, e.Delta)
	case *loop.ReasoningDelta:
		return s.gather(ctx, loop.EventReasoningDelta, e.EventHeader, e.Delta)
	}
	if !s.flushDeltas(ctx) {
		return false
	}
	return s.publishOne(ctx, ev)
}

func (s *eventSink) gather(ctx context.Context, kind loop.EventType, hdr loop.EventHeader, text string) bool {
	if s.pendKind != "" && s.pendKind != kind && !s.flushDeltas(ctx) {
		return false
	}
	if s.pendKind == "" {
		s.pendKind, s.pendHdr = kind, hdr
		s.timer = time.AfterFunc(s.coalesce, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if !s.closed {
				s.flushDeltas(context.Background())
			}
		})
	}
	s.pend.WriteString(text)
	if s.pend.Len() >= maxCoalesced {
		return s.flushDeltas(ctx)
	}
	return true
}

// flushDeltas sends the gathered deltas as one event (s.mu held).
func (s *eventSink) flushDeltas(ctx context.Context) bool {
	if s.pendKind == "" {
		return s.err == nil
	}
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	var ev loop.Event
	if s.pendKind == loop.EventTextDelta {
		ev = &loop.TextDelta{EventHeader: s.pendHdr, Delta: s.pend.String()}
	} else {
		ev = &loop.ReasoningDelta{EventHeader: s.pendHdr, Delta: s.pend.String()}
	}
	s.pendKind = ""
	s.pend.Reset()
	return s.publishOne(ctx, ev)
}

// close stops the coalescing timer; gathered deltas of an interrupted run
// are provisional and dropped.
func (s *eventSink) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
}

// inFlightTurn reports whether the last published event leaves a turn open.
func inFlightTurn(last *bus.Envelope) bool {
	if last == nil {
		return false
	}
	switch last.Type {
	case loop.EventTurnEnded, loop.EventRunStarted, bus.EventRunResumed, loop.EventHandoffOccurred,
		loop.EventOutputDiscarded, loop.EventRunCompleted, loop.EventRunFailed:
		return false
	}
	return true
}

// publishOne sends one event; false stops the stream (publishing failed).
func (s *eventSink) publishOne(ctx context.Context, ev loop.Event) bool {
	s.seen = true
	if s.err != nil {
		return false
	}
	var out loop.Event = ev
	flush := false
	switch e := ev.(type) {
	case *loop.RunStarted:
		// run_resumed only when an earlier claim of this submission
		// published something; otherwise this is its first visible start.
		// (A first delivery may find its own events too: a server that
		// lost its consumer state delivers a claimed request again.)
		resumed := s.d.published
		if s.replay && !resumed {
			return true
		}
		if resumed {
			s.w.m.resumes.WithLabelValues(s.agent).Inc()
			r := &bus.RunResumed{Worker: s.w.cfg.ID, Attempt: s.attempt, FromTurn: 0,
				Version: s.versions.version, StartedVersion: s.versions.started, PreviousVersion: s.versions.previous}
			r.EventHeader = e.EventHeader
			if s.last != nil {
				r.FromTurn = s.last.Turn
			}
			// Flush run_resumed alone: if another writer stored this seq
			// first, stop before publishing anything else.
			if !s.send(ctx, r) || !s.flush(ctx) {
				return false
			}
			if inFlightTurn(s.last) || s.last != nil && s.last.Turn > e.Turn {
				// The last event leaves a turn open, or belongs to a turn
				// the checkpoint does not hold (the loop resumes at the
				// checkpoint's turns: a final message is stored with the
				// run's completion, so its turn's events, turn_ended
				// included, can precede its checkpoint): what it told is
				// discarded, and the turn runs again.
				od := &loop.OutputDiscarded{}
				od.EventHeader = e.EventHeader
				if !s.send(ctx, od) {
					return false
				}
			}
			return s.flush(ctx)
		}
		s.w.m.started.WithLabelValues(s.agent).Inc()
		out = &bus.RunStarted{RunStarted: *e, Worker: s.w.cfg.ID, ParentRunID: s.parent, Version: s.versions.version}
		// Flushed alone, so that a seq another writer stored first stops
		// the run before it publishes more — except for a run its claim
		// found never claimed: no other writer has published it, and the
		// flush before its first checkpoint stores run_started too.
		flush = !s.d.unclaimed
	case *loop.TurnStarted:
		s.turnT0 = time.Now()
	case *loop.MessageCompleted:
		if !s.turnT0.IsZero() {
			s.w.m.modelSeconds.WithLabelValues(s.agent).Observe(time.Since(s.turnT0).Seconds())
		}
	case *loop.ToolCallStarted:
		if s.toolT0 == nil {
			s.toolT0 = map[string]time.Time{}
		}
		s.toolT0[e.Call.ID] = time.Now()
	case *loop.ToolCallCompleted:
		if t0, ok := s.toolT0[e.Call.ID]; ok {
			s.w.m.toolSeconds.WithLabelValues(e.Call.Name).Observe(time.Since(t0).Seconds())
			delete(s.toolT0, e.Call.ID)
		}
	case *loop.TurnEnded:
		if !s.turnT0.IsZero() {
			s.w.m.turnSeconds.WithLabelValues(s.agent).Observe(time.Since(s.turnT0).Seconds())
		}
	case *loop.ApprovalRequired:
		if s.askT0 == nil {
			s.askT0 = map[string]time.Time{}
		}
		s.askT0[e.Call.ID] = time.Now()
		flush = true
	case *loop.ApprovalResolved:
		if t0, ok := s.askT0[e.CallID]; ok {
			s.w.m.approvalWait.WithLabelValues(s.agent, string(e.Decision)).Observe(time.Since(t0).Seconds())
			delete(s.askT0, e.CallID)
		}
		flush = true
	case *loop.ToolCallFailed:
		s.w.m.toolErrors.WithLabelValues(e.Call.Name).Inc()
	case *loop.RunCompleted, *loop.RunFailed:
		if e, ok := ev.(*loop.RunFailed); ok && errors.Is(e.Err, loop.ErrFenced) {
			s.fenced = true
			return false
		}
		if s.lostSeq() {
			return false
		}
		// Index the outcome before telling it: whoever sees the terminal
		// event finds the run's status final, so a resubmission is
		// replayed rather than taken for a submission still in flight.
		s.w.indexOutcome(ctx, s.d, s.runID, ev)
		outcome := "completed"
		if _, failed := ev.(*loop.RunFailed); failed {
			outcome = "failed"
		}
		s.w.m.runSeconds.WithLabelValues(s.agent, outcome).Observe(time.Since(s.d.meta.Timestamp).Seconds())
		s.terminal = true
		flush = true
	}
	if !s.send(ctx, out) {
		return false
	}
	if flush {
		return s.flush(ctx)
	}
	return true
}

// shielded is what the sink publishes with: the run's context without
// its cancellation (a run that is cancelled still publishes what it
// told), made once when the sink is (pubCtx), else from ctx.
func (s *eventSink) shielded(ctx context.Context) context.Context {
	if s.pubCtx != nil {
		return s.pubCtx
	}
	return context.WithoutCancel(ctx)
}

func (s *eventSink) send(ctx context.Context, ev loop.Event) bool {
	if s.lostSeq() {
		return false
	}
	if _, err := s.rp.Publish(s.shielded(ctx), ev); err != nil {
		s.err = err
		return false
	}
	return true
}

func (s *eventSink) flush(ctx context.Context) bool {
	t0 := time.Now()
	if err := s.rp.Flush(s.shielded(ctx)); err != nil {
		s.err = err
		return false
	}
	s.w.m.publishSecs.Observe(time.Since(t0).Seconds())
	return !s.lostSeq()
}

// beforeCheckpoint waits until every event published so far is stored
// (gathered deltas are sent first). It fails once a publish or a flush has
// failed — every later call too, so no checkpoint follows a fact the
// stream may lack — with an error matching loop.ErrFenced when another
// writer stored this run's seqs, else loop.ErrUnavailable: the loop stops
// without a terminal checkpoint or event, and the run is released.
func (s *eventSink) beforeCheckpoint(ctx context.Context) error {
	if s.coalesce > 0 {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.flushDeltas(ctx)
	}
	if s.err == nil && !s.fenced {
		s.flush(ctx)
	}
	switch {
	case s.fenced:
		return fmt.Errorf("worker: run %s: another worker stored events under its seqs: %w", s.runID, loop.ErrFenced)
	case s.err != nil:
		return fmt.Errorf("worker: run %s: storing its events failed (%w): %w", s.runID, s.err, loop.ErrUnavailable)
	}
	return nil
}

// eventsFirst is the checkpointer a worker gives the loop: each append
// first waits for the run's published events to be stored (see
// eventSink.beforeCheckpoint).
type eventsFirst struct {
	loop.Checkpointer
	sink *eventSink
}

func (c eventsFirst) Append(ctx context.Context, runID string, w loop.CheckpointWrite) (uint64, error) {
	if err := c.sink.beforeCheckpoint(ctx); err != nil {
		return 0, err
	}
	return c.Checkpointer.Append(ctx, runID, w)
}

// lostSeq reports (and records as fenced) that the stream already held a
// seq this sink published: another worker is publishing this run (this
// one stalled and lost its claim, or they raced for it). Publishing on
// would interleave two executions' events under one run, so the sink stops
// like a fenced checkpoint write: no more events, no ack.
func (s *eventSink) lostSeq() bool {
	if s.rp.Duplicates() == 0 {
		return false
	}
	if !s.fenced {
		s.d.log.Warn("run fenced: another worker stored events under this run's seqs; stopping without ack",
			"duplicates", s.rp.Duplicates())
	}
	s.fenced = true
	return true
}
