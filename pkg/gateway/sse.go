package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// errStopping ends SSE streams when Stop begins.
var errStopping = errors.New("gateway: stopping")

// span is the part of a run's events one stream shows.
type span struct {
	from uint64 // first seq
	// stored limits the stream to events stored already, seqs from..until
	// (a replayed run); until < from means none.
	stored bool
	until  uint64
	// follow keeps the stream open past terminal events, for later
	// submissions of the run.
	follow bool
}

// events handles GET /v1/runs/{id}/events: the run's events as SSE from
// the first, or after Last-Event-ID (the header, else ?last_event_id=), or
// from ?from_seq=, up to the terminal event (?follow=true: past it). A
// stream resumed after the last event of a finished run is 204 No Content,
// which tells an EventSource to stop reconnecting.
func (g *Gateway) events(w http.ResponseWriter, r *http.Request) {
	runID := r.PathValue("id")
	st, err := g.cfg.API.Status(r.Context(), runID)
	if err != nil {
		g.fail(w, r, err)
		return
	}
	sp, herr := eventsSpan(r)
	if herr != nil {
		g.fail(w, r, herr)
		return
	}
	if sp.from > 1 && !sp.follow && (st.Status == bus.StateCompleted || st.Status == bus.StateFailed) {
		// The terminal event is stored before the status says finished.
		last, err := g.pub.LastSeq(r.Context(), runID)
		if err != nil {
			g.fail(w, r, err)
			return
		}
		if sp.from > last {
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	g.stream(w, r, runID, sp)
}

// eventsSpan reads where a stream starts and whether it follows.
func eventsSpan(r *http.Request) (span, *httpError) {
	sp := span{from: 1}
	q := r.URL.Query()
	if v := q.Get("follow"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return sp, invalidRequest(http.StatusBadRequest, "follow="+strconv.Quote(v)+" is not a boolean", "use follow=true or leave it out")
		}
		sp.follow = b
	}
	after := func(name, v string) (span, *httpError) {
		n, herr := parseSeq(name, v)
		sp.from = n + 1
		return sp, herr
	}
	switch {
	case r.Header.Get("Last-Event-ID") != "":
		return after("Last-Event-ID", r.Header.Get("Last-Event-ID"))
	case q.Get("last_event_id") != "":
		return after("last_event_id", q.Get("last_event_id"))
	case q.Get("from_seq") != "":
		n, herr := parseSeq("from_seq", q.Get("from_seq"))
		if herr == nil && n == 0 {
			herr = invalidRequest(http.StatusBadRequest, "from_seq=0: seqs start at 1", "use from_seq=1 for every event")
		}
		sp.from = n
		return sp, herr
	}
	return sp, nil
}

func parseSeq(name, v string) (uint64, *httpError) {
	n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
	if err != nil || n == ^uint64(0) {
		return 0, invalidRequest(http.StatusBadRequest, name+" "+strconv.Quote(v)+" is not an event seq",
			"give the id: of the last event received (a positive integer)")
	}
	return n, nil
}

// stream writes a run's events as SSE: one event per envelope with id: the
// seq, event: the type and data: the JSON envelope; a comment after each
// Heartbeat of silence. It ends after the span's last event, when the
// client goes away or when the gateway stops, and always closes its tail.
func (g *Gateway) stream(w http.ResponseWriter, r *http.Request, runID string, sp span) {
	if g.drain.Err() != nil {
		g.fail(w, r, newError(http.StatusServiceUnavailable, TypeUnavailable, "the gateway is stopping", "reconnect to another gateway"))
		return
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	defer context.AfterFunc(g.drain, func() { cancel(errStopping) })()

	if sp.stored && sp.until < sp.from {
		_, _ = g.startSSE(w) // nothing stored to show
		return
	}
	opts := []bus.TailOption{bus.FromSeq(sp.from)}
	if sp.stored || sp.follow {
		opts = append(opts, bus.Follow())
	}
	tail, err := g.cfg.Client.Tail(ctx, runID, opts...)
	if err != nil {
		g.fail(w, r, err)
		return
	}
	defer func() {
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer ccancel()
		if err := tail.Close(cctx); err != nil {
			g.log.Debug("gateway: closing a tail failed (the server drops it when idle)", "run_id", runID, "error", err)
		}
	}()
	sw, err := g.startSSE(w)
	if err != nil {
		return
	}
	g.m.streams.Inc()
	defer g.m.streams.Dec()
	for {
		nctx, ncancel := context.WithTimeout(ctx, g.cfg.Heartbeat)
		env, err := tail.Next(nctx)
		ncancel()
		var de *bus.DecodeError
		switch {
		case err == nil:
		case errors.Is(err, io.EOF), ctx.Err() != nil:
			return // the end, the client left, or the gateway stops
		case errors.Is(err, context.DeadlineExceeded):
			if sw.send([]byte(": keep-alive\n\n")) != nil {
				return
			}
			continue
		case errors.As(err, &de):
			g.log.Warn("gateway: skipping an event that does not decode", "run_id", runID, "error", err)
			continue
		default:
			g.log.Warn("gateway: tailing a run failed", "run_id", runID, "error", err)
			_ = sw.sendError(errorOf(err))
			return
		}
		frame, err := formatEvent(env)
		if err != nil {
			g.log.Warn("gateway: skipping an event that does not convert to JSON", "run_id", runID, "seq", env.Seq, "error", err)
			continue
		}
		if sw.send(frame) != nil {
			return
		}
		g.m.sseEvents.Inc()
		if sp.stored && env.Seq >= sp.until {
			return
		}
	}
}

// sseWriter writes SSE frames, each under a fresh write deadline.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

// startSSE sends the headers of an event stream.
func (g *Gateway) startSSE(w http.ResponseWriter) (*sseWriter, error) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	sw := &sseWriter{w: w, rc: http.NewResponseController(w), timeout: g.cfg.WriteTimeout}
	return sw, sw.flush()
}

func (s *sseWriter) send(frame []byte) error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	if _, err := s.w.Write(frame); err != nil {
		return err
	}
	return s.flush()
}

func (s *sseWriter) flush() error {
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// sendError ends a stream that failed after its headers went out with an
// event "stream_error" whose data is the {"error": …} body.
func (s *sseWriter) sendError(he *httpError) error {
	data, err := bus.Marshal(bus.JSON, &bus.ErrorReply{Error: he.body})
	if err != nil {
		return err
	}
	return s.send(frame("", "stream_error", data))
}

// formatEvent is the SSE frame of an envelope.
func formatEvent(env *bus.Envelope) ([]byte, error) {
	data, err := env.MarshalAs(bus.JSON)
	if err != nil {
		return nil, err
	}
	return frame(strconv.FormatUint(env.Seq, 10), string(env.Type), data), nil
}

// frame formats one SSE event; data may span lines.
func frame(id, event string, data []byte) []byte {
	var b bytes.Buffer
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	b.WriteString("event: " + strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, event) + "\n")
	for line := range bytes.Lines(data) {
		b.WriteString("data: ")
		b.Write(bytes.TrimRight(line, "\r\n"))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	return b.Bytes()
}
