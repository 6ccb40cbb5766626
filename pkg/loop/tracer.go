package loop

import (
	"context"
	"sync"
	"time"
)

// Attr is a span attribute.
type Attr struct {
	Key   string
	Value any
}

// Span is an open trace span.
type Span interface {
	End(err error)
}

// Tracer opens spans named "run", "turn", "model_call", "tool_call" and
// "handoff". The context Start returns carries the span: the run's span
// parents the turns, a turn's its model and tool calls, and a tool is
// called with its tool_call span's context. Implementations are safe for
// concurrent use.
type Tracer interface {
	Start(ctx context.Context, name string, attrs ...Attr) (context.Context, Span)
}

// NoopTracer records nothing.
type NoopTracer struct{}

type noopSpan struct{}

func (noopSpan) End(error) {}

// Start returns ctx and a span that does nothing.
func (NoopTracer) Start(ctx context.Context, _ string, _ ...Attr) (context.Context, Span) {
	return ctx, noopSpan{}
}

// RecordedSpan is a finished span of an InMemoryTracer.
type RecordedSpan struct {
	Name     string
	Attrs    []Attr
	Err      error
	Start    time.Time
	Duration time.Duration
}

// InMemoryTracer records finished spans, for tests and debugging.
type InMemoryTracer struct {
	mu    sync.Mutex
	spans []RecordedSpan
}

// Start opens a span.
func (t *InMemoryTracer) Start(ctx context.Context, name string, attrs ...Attr) (context.Context, Span) {
	return ctx, &memSpan{t: t, s: RecordedSpan{Name: name, Attrs: append([]Attr(nil), attrs...), Start: time.Now()}}
}

// Spans returns the finished spans in end order.
func (t *InMemoryTracer) Spans() []RecordedSpan {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]RecordedSpan(nil), t.spans...)
}

type memSpan struct {
	t *InMemoryTracer
	s RecordedSpan
}

func (s *memSpan) End(err error) {
	s.s.Err = err
	s.s.Duration = time.Since(s.s.Start)
	s.t.mu.Lock()
	s.t.spans = append(s.t.spans, s.s)
	s.t.mu.Unlock()
}
