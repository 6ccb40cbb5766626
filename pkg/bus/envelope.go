package bus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Envelope is one event on <p>.events.<run_id>:
// {run_id, seq, type, time, agent, turn, data} (docs/protocol.md#events).
// Data holds the event's data still encoded in Encoding; Event decodes it.
type Envelope struct {
	RunID string
	// Seq starts at 1 and grows by one per event for the life of the run.
	Seq  uint64
	Type loop.EventType
	// Time is when the event was published, in UTC; on the wire RFC 3339.
	Time time.Time
	// Agent is the active agent and Turn the turn (0 before the first).
	Agent string
	Turn  int
	// Data is the event's data in Encoding.
	Data     []byte
	Encoding Encoding
}

type envelopeJSON struct {
	RunID string          `json:"run_id"`
	Seq   uint64          `json:"seq"`
	Type  string          `json:"type"`
	Time  string          `json:"time"`
	Agent string          `json:"agent"`
	Turn  int             `json:"turn"`
	Data  json.RawMessage `json:"data"`
}

type envelopeMsgpack struct {
	RunID string             `msgpack:"run_id"`
	Seq   uint64             `msgpack:"seq"`
	Type  string             `msgpack:"type"`
	Time  string             `msgpack:"time"`
	Agent string             `msgpack:"agent"`
	Turn  int                `msgpack:"turn"`
	Data  msgpack.RawMessage `msgpack:"data"`
}

// NewEnvelope builds the envelope of ev, encoding its data in enc. Agent and
// turn come from ev.Header().
func NewEnvelope(enc Encoding, runID string, seq uint64, at time.Time, ev loop.Event) (*Envelope, error) {
	if err := checkEventID(runID, seq); err != nil {
		return nil, err
	}
	data, err := Marshal(enc, ev)
	if err != nil {
		return nil, fmt.Errorf("bus: encode %s event: %w", ev.Type(), err)
	}
	h := ev.Header()
	return &Envelope{
		RunID: runID, Seq: seq, Type: ev.Type(), Time: at.UTC(),
		Agent: h.Agent, Turn: h.Turn, Data: data, Encoding: enc,
	}, nil
}

// Marshal encodes the envelope in its own encoding.
func (e *Envelope) Marshal() ([]byte, error) { return e.MarshalAs(e.Encoding) }

// MarshalAs encodes the envelope in enc, transcoding the data when enc is
// not the envelope's encoding: through the concrete event type when it is
// known (so fields keep their types), generically otherwise.
func (e *Envelope) MarshalAs(enc Encoding) ([]byte, error) {
	data := e.Data
	if enc != e.Encoding || len(data) == 0 {
		var err error
		if data, err = e.dataAs(enc); err != nil {
			return nil, err
		}
	}
	var w envelopeWriter
	out, ok, err := w.envelope(enc, e, data)
	if err != nil {
		return nil, err
	}
	if ok {
		return bytes.Clone(out), nil
	}
	// Data that is not JSON: the encoder's error.
	ts := e.Time.UTC().Format(time.RFC3339Nano)
	return Marshal(JSON, envelopeJSON{RunID: e.RunID, Seq: e.Seq, Type: string(e.Type), Time: ts, Agent: e.Agent, Turn: e.Turn, Data: data})
}

// MarshalJSON encodes the envelope as JSON whatever its encoding, so
// json.Marshal of an *Envelope prints what `lovia tail --json` shows.
func (e *Envelope) MarshalJSON() ([]byte, error) { return e.MarshalAs(JSON) }

func (e *Envelope) dataAs(enc Encoding) ([]byte, error) {
	if len(e.Data) == 0 {
		return Marshal(enc, struct{}{})
	}
	if ev, err := e.Event(); err == nil {
		return Marshal(enc, ev)
	}
	var v any
	if e.Encoding == JSON {
		var err error
		if v, err = jsonToValue(e.Data); err != nil {
			return nil, &DecodeError{What: string(e.Type) + " data", Encoding: e.Encoding, Err: fmt.Errorf("%w: %w", ErrMalformed, err)}
		}
	} else {
		var m map[string]any
		if err := Unmarshal(e.Encoding, e.Data, &m); err != nil {
			return nil, &DecodeError{What: string(e.Type) + " data", Encoding: e.Encoding, Err: err}
		}
		v = m
	}
	if enc == JSON {
		if err := jsonSafe(v, 0); err != nil {
			return nil, err
		}
	}
	return Marshal(enc, v)
}

// Event decodes the data into the concrete event of the envelope's type
// (a loop event, or RunStarted / RunResumed of this package) and sets its
// header's agent and turn. An unknown type matches ErrUnknownEventType.
func (e *Envelope) Event() (loop.Event, error) {
	ev := newEvent(e.Type)
	if ev == nil {
		return nil, &DecodeError{What: "event", Encoding: e.Encoding, Err: fmt.Errorf("%w: %q", ErrUnknownEventType, e.Type)}
	}
	if err := e.DecodeData(ev); err != nil {
		return nil, err
	}
	h := ev.Header()
	h.Agent, h.Turn = e.Agent, e.Turn
	return ev, nil
}

// DecodeData decodes the data into v.
func (e *Envelope) DecodeData(v any) error {
	if err := Unmarshal(e.Encoding, e.Data, v); err != nil {
		return &DecodeError{What: string(e.Type) + " data", Encoding: e.Encoding, Err: err}
	}
	return nil
}

// IsTerminal reports whether the envelope ends a submission.
func (e *Envelope) IsTerminal() bool { return IsTerminalType(e.Type) }

// MsgID is the envelope's Nats-Msg-Id: "<run_id>.<seq>".
func (e *Envelope) MsgID() string { return eventMsgID(e.RunID, e.Seq) }

func eventMsgID(runID string, seq uint64) string {
	var b [20]byte
	return runID + "." + string(strconv.AppendUint(b[:0], seq, 10))
}

// Headers returns the headers an event is published with: Nats-Msg-Id,
// Lovia-Event, Lovia-Seq and Content-Type.
func (e *Envelope) Headers() nats.Header {
	vals := new(eventVals)
	vals.set(e.RunID, e.Seq, e.Type, e.Encoding, "", TraceContext{})
	return eventHeaders(nil, vals)
}

// eventVals are the header values of one event, in this order:
// Nats-Msg-Id, Lovia-Event, Lovia-Seq, Content-Type, Lovia-Request,
// traceparent, tracestate (the last three empty when not stamped). They
// are all an event needs to have its headers written again, exactly as
// at its first publish (see eventHeaders).
type eventVals [7]string

// set fills v with the header values of an event: its id, type and
// encoding, the run request it is stamped with (if request is set) and
// the trace context t (if set).
func (v *eventVals) set(runID string, seq uint64, typ loop.EventType, enc Encoding, request string, t TraceContext) {
	id := eventMsgID(runID, seq)
	if t.Parent == "" {
		t.State = "" // no tracestate without a traceparent (see TraceContext.Set)
	}
	*v = eventVals{id, string(typ), id[len(runID)+1:], enc.ContentType(), request, t.Parent, t.State}
}

// eventHeaderRoom is the room of a header map eventHeaders makes: every
// header of an event, plus Lovia-High-Seq (added by a republish), in one
// group of the map.
const eventHeaderRoom = 8

// eventHeaders writes the headers whose values are in vals (see
// Envelope.Headers; plus HeaderRequest, traceparent and tracestate when
// set) to h and returns it: h is cleared first, so a publisher can reuse
// one map for every event; nil makes a new map. The values stay in vals
// (h's slices point into it), which must not change while h is in use.
func eventHeaders(h nats.Header, vals *eventVals) nats.Header {
	if h == nil {
		h = make(nats.Header, eventHeaderRoom)
	} else {
		clear(h)
	}
	h[HeaderMsgID] = vals[0:1:1]
	h[HeaderEvent] = vals[1:2:2]
	h[HeaderSeq] = vals[2:3:3]
	h[HeaderContentType] = vals[3:4:4]
	if vals[4] != "" {
		h[HeaderRequest] = vals[4:5:5]
	}
	if vals[5] != "" {
		h[HeaderTraceParent] = vals[5:6:6]
		if vals[6] != "" {
			h[HeaderTraceState] = vals[6:7:7]
		}
	}
	return h
}

// DecodeEnvelope decodes an event message. The envelope must name a valid
// run id, a seq of at least 1, a type and an RFC 3339 time; its data is
// kept encoded (see Envelope.Event). Errors match ErrUnknownEncoding,
// ErrMalformed or ErrInvalidRequest.
func DecodeEnvelope(h nats.Header, body []byte) (*Envelope, error) {
	enc, err := EncodingOf(h, body)
	if err != nil {
		return nil, &DecodeError{What: "event envelope", Err: err}
	}
	var e Envelope
	var ts string
	switch enc {
	case JSON:
		var w envelopeJSON
		if err := Unmarshal(JSON, body, &w); err != nil {
			return nil, &DecodeError{What: "event envelope", Encoding: enc, Err: err}
		}
		e = Envelope{RunID: w.RunID, Seq: w.Seq, Type: loop.EventType(w.Type), Agent: w.Agent, Turn: w.Turn, Data: w.Data}
		ts = w.Time
		if string(e.Data) == "null" {
			e.Data = nil
		}
	case Msgpack:
		var w envelopeMsgpack
		if err := Unmarshal(Msgpack, body, &w); err != nil {
			return nil, &DecodeError{What: "event envelope", Encoding: enc, Err: err}
		}
		e = Envelope{RunID: w.RunID, Seq: w.Seq, Type: loop.EventType(w.Type), Agent: w.Agent, Turn: w.Turn, Data: w.Data}
		ts = w.Time
		if len(e.Data) == 1 && e.Data[0] == 0xc0 { // nil
			e.Data = nil
		}
	}
	e.Encoding = enc
	if err := e.check(ts); err != nil {
		return nil, &DecodeError{What: "event envelope", Encoding: enc, Err: err}
	}
	return &e, nil
}

func (e *Envelope) check(ts string) error {
	if err := ValidateID("run_id", e.RunID); err != nil {
		return err
	}
	if e.Seq == 0 {
		return &FieldError{Field: "seq", Reason: "must be at least 1"}
	}
	if e.Type == "" {
		return &FieldError{Field: "type", Reason: "is required"}
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return &FieldError{Field: "time", Reason: "is not an RFC 3339 time: " + quote(ts)}
	}
	e.Time = t.UTC()
	if e.Data != nil && !dataIsMap(e.Encoding, e.Data) {
		return &FieldError{Field: "data", Reason: "is not an object"}
	}
	return nil
}

func dataIsMap(enc Encoding, data []byte) bool {
	if enc == Msgpack {
		return len(data) > 0 && isMsgpackMap(data[0])
	}
	for _, c := range data {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c == '{'
	}
	return false
}

// EncodeEvent is NewEnvelope followed by Marshal, in one pass.
func EncodeEvent(enc Encoding, runID string, seq uint64, at time.Time, ev loop.Event) ([]byte, error) {
	if err := checkEventID(runID, seq); err != nil {
		return nil, err
	}
	var w envelopeWriter
	body, err := w.event(enc, runID, seq, at, ev)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(body), nil
}

// checkEventID checks an event's run id and seq.
func checkEventID(runID string, seq uint64) error {
	if err := ValidateID("run_id", runID); err != nil {
		return err
	}
	if seq == 0 {
		return &FieldError{Field: "seq", Reason: "must be at least 1"}
	}
	return nil
}
