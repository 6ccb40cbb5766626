package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// remoteSpan returns a context with a sampled remote span context, as a
// traceparent header would give.
func remoteSpan(t *testing.T, state string) context.Context {
	tid, err := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	require.NoError(t, err)
	sid, err := trace.SpanIDFromHex("00f067aa0ba902b7")
	require.NoError(t, err)
	ts, err := trace.ParseTraceState(state)
	require.NoError(t, err)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true})
	return trace.ContextWithRemoteSpanContext(context.Background(), sc)
}

// TestTraceContextHeaders: the W3C trace context of a span goes to
// lower-case traceparent and tracestate headers and comes back as the
// same remote span context; none, or a malformed one, gives none.
func TestTraceContextHeaders(t *testing.T) {
	t.Parallel()
	ctx := remoteSpan(t, "vendor=x")
	h := nats.Header{}
	bus.InjectTrace(ctx, h)
	require.Equal(t, []string{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, h[bus.HeaderTraceParent])
	require.Equal(t, []string{"vendor=x"}, h[bus.HeaderTraceState])
	back := trace.SpanContextFromContext(bus.ExtractTrace(context.Background(), h))
	require.True(t, back.IsRemote())
	require.Equal(t, trace.SpanContextFromContext(ctx).TraceID(), back.TraceID())
	require.Equal(t, trace.SpanContextFromContext(ctx).SpanID(), back.SpanID())
	require.Equal(t, "vendor=x", back.TraceState().String())

	none := nats.Header{}
	bus.InjectTrace(context.Background(), none)
	require.Empty(t, none, "no span, no headers")
	require.True(t, bus.TraceContextFrom(nil).IsZero())
	bad := nats.Header{bus.HeaderTraceParent: []string{"not-a-traceparent"}}
	require.False(t, trace.SpanContextFromContext(bus.ExtractTrace(context.Background(), bad)).IsValid())
}

// TestTraceOnRequestsAndEvents: PublishRequest writes RequestMeta.Trace to
// the run request, and a RunPublisher stamps each event with the trace
// context SetTrace gave it — and nothing without one.
func TestTraceOnRequestsAndEvents(t *testing.T) {
	t.Parallel()
	b := provisioned(t)
	ctx := ctxT(t)
	names, _ := bus.NewNames("")
	tc := bus.TraceContextOf(remoteSpan(t, ""))
	seq, err := bus.PublishRequest(ctx, b.js, names, "demo", []byte(`{"input":"hi"}`), bus.RequestMeta{RunID: "r1", ContentType: bus.ContentTypeJSON, Trace: tc})
	require.NoError(t, err)
	msg, err := b.js.Stream(ctx, names.RunsStream())
	require.NoError(t, err)
	raw, err := msg.GetMsg(ctx, seq)
	require.NoError(t, err)
	require.Equal(t, tc.Parent, raw.Header.Get(bus.HeaderTraceParent))
	require.Empty(t, raw.Header.Values(bus.HeaderTraceState))

	pub, err := bus.NewPublisher(b.js, bus.PublisherConfig{})
	require.NoError(t, err)
	rp, err := pub.Open(ctx, "r1", bus.JSON)
	require.NoError(t, err)
	ev := &loop.TextDelta{EventHeader: hdr("demo", 1), Delta: "x"}
	_, err = rp.Publish(ctx, ev) // before SetTrace: none
	require.NoError(t, err)
	rp.SetTrace(tc)
	_, err = rp.Publish(ctx, ev)
	require.NoError(t, err)
	require.NoError(t, rp.Flush(ctx))
	subj, _ := names.Events("r1")
	cons, err := b.js.OrderedConsumer(ctx, names.EventsStream(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}})
	require.NoError(t, err)
	var got []string
	for range 2 {
		m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		require.NoError(t, err)
		got = append(got, m.Headers().Get(bus.HeaderTraceParent))
	}
	require.Equal(t, []string{"", tc.Parent}, got)
}
