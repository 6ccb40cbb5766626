package bus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// envelopeWriter writes event envelopes into one buffer it keeps: the
// envelope's fields by hand, the event's data with an encoder bound to
// the buffer. The bytes are those Marshal gives for envelopeJSON and
// envelopeMsgpack (TestEnvelopeGoldenBytes pins them); an event costs no
// intermediate data slice, boxed struct or encoder. Run publishers and
// Marshal share pooled ones (marshalWriters). Not safe for concurrent
// use.
type envelopeWriter struct {
	buf bytes.Buffer
	js  *json.Encoder
	mp  *msgpack.Encoder
}

// jsonEncoder is the buffer's JSON encoder, made on first use.
func (w *envelopeWriter) jsonEncoder() *json.Encoder {
	if w.js == nil {
		w.js = json.NewEncoder(&w.buf)
		w.js.SetEscapeHTML(false)
	}
	return w.js
}

// msgpackEncoder is the buffer's msgpack encoder, made on first use, with
// Marshal's settings.
func (w *envelopeWriter) msgpackEncoder() *msgpack.Encoder {
	if w.mp == nil {
		w.mp = msgpack.NewEncoder(&w.buf)
		w.mp.SetCustomStructTag("json")
		w.mp.UseCompactInts(true)
		w.mp.SetSortMapKeys(true)
	}
	return w.mp
}

// event writes the envelope of ev and returns its bytes, valid until the
// next call. Agent and turn come from ev.Header(). The caller has checked
// the run id and seq.
func (w *envelopeWriter) event(enc Encoding, runID string, seq uint64, at time.Time, ev loop.Event) ([]byte, error) {
	h := ev.Header()
	err := w.head(enc, runID, seq, ev.Type(), at, h.Agent, h.Turn)
	if err == nil {
		err = w.data(enc, ev)
	}
	if err != nil {
		return nil, fmt.Errorf("bus: encode %s event: %w", ev.Type(), err)
	}
	return w.tail(enc), nil
}

// data writes ev as the envelope's data. A Go value in a free-form field
// is written in msgpack as its JSON value (JSONValue), the value the JSON
// encoding gives.
func (w *envelopeWriter) data(enc Encoding, ev loop.Event) error {
	if enc == JSON {
		return w.jsonValue(ev)
	}
	return w.msgpackEncoder().Encode(jsonLikeEvent(ev))
}

// envelope writes e with data (in enc) and returns its bytes, valid until
// the next call. ok is false when JSON data is not valid JSON: Marshal
// reports that error in its own words.
func (w *envelopeWriter) envelope(enc Encoding, e *Envelope, data []byte) (out []byte, ok bool, err error) {
	if err := w.head(enc, e.RunID, e.Seq, e.Type, e.Time, e.Agent, e.Turn); err != nil {
		return nil, false, err
	}
	if enc == JSON {
		// encoding/json compacts a RawMessage; so does this.
		if json.Compact(&w.buf, data) != nil {
			return nil, false, nil
		}
	} else {
		w.buf.Write(data)
	}
	return w.tail(enc), true, nil
}

// head resets the buffer and writes the envelope up to its data value:
// for JSON `{"run_id":…,"data":`, for msgpack the map header and every
// field before data's value, in envelopeJSON's order.
func (w *envelopeWriter) head(enc Encoding, runID string, seq uint64, typ loop.EventType, at time.Time, agent string, turn int) error {
	w.buf.Reset()
	var ts [64]byte
	t := at.UTC().AppendFormat(ts[:0], time.RFC3339Nano)
	switch enc {
	case JSON:
		b := &w.buf
		b.WriteString(`{"run_id":`)
		w.jsonString(runID)
		b.WriteString(`,"seq":`)
		b.Write(strconv.AppendUint(ts[len(t):len(t)], seq, 10))
		b.WriteString(`,"type":`)
		w.jsonString(string(typ))
		b.WriteString(`,"time":"`)
		b.Write(t) // RFC 3339 needs no escaping
		b.WriteString(`","agent":`)
		w.jsonString(agent)
		b.WriteString(`,"turn":`)
		b.Write(strconv.AppendInt(ts[len(t):len(t)], int64(turn), 10))
		b.WriteString(`,"data":`)
		return nil
	case Msgpack:
		m := w.msgpackEncoder()
		// The struct encoder's calls for each field, so the same bytes.
		_ = m.EncodeMapLen(7)
		// Writes to a bytes.Buffer do not fail.
		_ = m.EncodeString("run_id")
		_ = m.EncodeString(runID)
		_ = m.EncodeString("seq")
		_ = m.EncodeUint(seq)
		_ = m.EncodeString("type")
		_ = m.EncodeString(string(typ))
		_ = m.EncodeString("time")
		msgpackStrLen(&w.buf, len(t))
		w.buf.Write(t)
		_ = m.EncodeString("agent")
		_ = m.EncodeString(agent)
		_ = m.EncodeString("turn")
		_ = m.EncodeInt(int64(turn))
		return m.EncodeString("data")
	}
	return fmt.Errorf("%w: %q", ErrUnknownEncoding, enc)
}

// tail ends the envelope and returns the buffer.
func (w *envelopeWriter) tail(enc Encoding) []byte {
	if enc == JSON {
		w.buf.WriteByte('}')
	}
	return w.buf.Bytes()
}

// jsonValue appends v as JSON without the encoder's newline.
func (w *envelopeWriter) jsonValue(v any) error {
	if err := w.jsonEncoder().Encode(v); err != nil {
		return err
	}
	w.buf.Truncate(w.buf.Len() - 1)
	return nil
}

// jsonString appends s as a JSON string the way the encoder does (no HTML
// escaping): as it is when nothing in it needs escaping, else through the
// encoder.
func (w *envelopeWriter) jsonString(s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			_ = w.jsonValue(s) // a string always encodes
			return
		}
	}
	w.buf.WriteByte('"')
	w.buf.WriteString(s)
	w.buf.WriteByte('"')
}

// msgpackStrLen writes the header of a msgpack string of n bytes, as the
// msgpack encoder does.
func msgpackStrLen(b *bytes.Buffer, n int) {
	switch {
	case n < 32:
		b.WriteByte(0xa0 | byte(n))
	case n < 256:
		b.WriteByte(0xd9)
		b.WriteByte(byte(n))
	case n <= 0xffff:
		b.WriteByte(0xda)
		b.WriteByte(byte(n >> 8))
		b.WriteByte(byte(n))
	default:
		b.WriteByte(0xdb)
		b.WriteByte(byte(n >> 24))
		b.WriteByte(byte(n >> 16))
		b.WriteByte(byte(n >> 8))
		b.WriteByte(byte(n))
	}
}
