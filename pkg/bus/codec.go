package bus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Encoding is a body encoding of the wire contract
// (docs/protocol.md#encodings). Both use the same snake_case field names.
type Encoding string

// Encodings.
const (
	// JSON is used at the edges: a request that arrives as JSON gets its
	// replies and events as JSON.
	JSON Encoding = "json"
	// Msgpack is used inside the fleet.
	Msgpack Encoding = "msgpack"
)

// Content types of the Content-Type header.
const (
	ContentTypeJSON    = "application/json"
	ContentTypeMsgpack = "application/msgpack"
)

// ContentType is the Content-Type header value of e.
func (e Encoding) ContentType() string {
	if e == Msgpack {
		return ContentTypeMsgpack
	}
	return ContentTypeJSON
}

// Valid reports whether e names an encoding.
func (e Encoding) Valid() bool { return e == JSON || e == Msgpack }

// EncodingOf returns a body's encoding (docs/protocol.md#encodings): the one
// its Content-Type names; without the header, JSON when the body starts
// with '{' (after white space) and msgpack when it starts with a msgpack
// map (a list body, such as stored entries, may also start with '[' or a
// msgpack array). Anything else matches ErrUnknownEncoding.
func EncodingOf(h nats.Header, body []byte) (Encoding, error) {
	if ct := headerValue(h, HeaderContentType); ct != "" {
		return encodingOfContentType(ct)
	}
	return sniff(body)
}

func encodingOfContentType(ct string) (Encoding, error) {
	switch ct { // what this package sends, without parsing
	case ContentTypeJSON:
		return JSON, nil
	case ContentTypeMsgpack:
		return Msgpack, nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		mt = strings.ToLower(strings.TrimSpace(ct))
	}
	switch mt {
	case ContentTypeJSON:
		return JSON, nil
	case ContentTypeMsgpack, "application/x-msgpack", "application/vnd.msgpack":
		return Msgpack, nil
	}
	return "", fmt.Errorf("%w: Content-Type %q (want %s or %s)", ErrUnknownEncoding, ct, ContentTypeJSON, ContentTypeMsgpack)
}

func sniff(body []byte) (Encoding, error) {
	t := bytes.TrimLeft(body, " \t\r\n")
	if len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		return JSON, nil
	}
	if len(body) > 0 && (isMsgpackMap(body[0]) || isMsgpackArray(body[0])) {
		return Msgpack, nil
	}
	if len(body) == 0 {
		return "", fmt.Errorf("%w: empty body without Content-Type", ErrUnknownEncoding)
	}
	return "", fmt.Errorf("%w: no Content-Type and the body is neither a JSON object nor a msgpack map", ErrUnknownEncoding)
}

// Marshal encodes v. JSON output does not escape HTML and has no trailing
// newline; msgpack output uses compact integers and sorted map keys, so
// equal values encode to equal bytes.
func Marshal(enc Encoding, v any) ([]byte, error) {
	if !enc.Valid() {
		return nil, fmt.Errorf("%w: %q", ErrUnknownEncoding, enc)
	}
	// A pooled buffer and its encoders: the result is the only allocation
	// of Marshal's own.
	w := marshalWriters.Get().(*envelopeWriter)
	defer putMarshalWriter(w)
	w.buf.Reset()
	var err error
	if enc == JSON {
		err = w.jsonValue(v)
	} else {
		if ev, ok := v.(loop.Event); ok {
			v = jsonLikeEvent(ev) // as the envelope writer does
		}
		err = w.msgpackEncoder().Encode(v)
	}
	if err != nil {
		return nil, err
	}
	return bytes.Clone(w.buf.Bytes()), nil
}

// marshalWriters are Marshal's buffers and encoders.
var marshalWriters = sync.Pool{New: func() any { return new(envelopeWriter) }}

// maxPooledBuffer bounds the buffer a pooled writer keeps.
const maxPooledBuffer = 64 << 10

func putMarshalWriter(w *envelopeWriter) {
	if w.buf.Cap() > maxPooledBuffer {
		return
	}
	marshalWriters.Put(w)
}

// Unmarshal decodes data into v. The body must be exactly one JSON object
// or array, or one msgpack map or array; msgpack is
// checked before decoding (lengths within the body, nesting at most
// maxDepth, no extension types), so arbitrary bytes cannot make it
// allocate without bound. Unmarshal never panics; its errors match
// ErrMalformed.
func Unmarshal(enc Encoding, data []byte, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: decoder panic: %v", ErrMalformed, r)
		}
	}()
	switch enc {
	case JSON:
		t := bytes.TrimLeft(data, " \t\r\n")
		if len(t) == 0 || (t[0] != '{' && t[0] != '[') {
			return fmt.Errorf("%w: not a JSON object or array", ErrMalformed)
		}
		if err := json.Unmarshal(data, v); err != nil {
			return fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		return nil
	case Msgpack:
		if len(data) == 0 || (!isMsgpackMap(data[0]) && !isMsgpackArray(data[0])) {
			return fmt.Errorf("%w: not a msgpack map or array", ErrMalformed)
		}
		if err := checkMsgpack(data); err != nil {
			return fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		d := msgpack.GetDecoder()
		defer msgpack.PutDecoder(d)
		d.Reset(bytes.NewReader(data))
		d.SetCustomStructTag("json")
		d.UseLooseInterfaceDecoding(true)
		if err := d.Decode(v); err != nil {
			return fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		return nil
	}
	return fmt.Errorf("%w: %q", ErrUnknownEncoding, enc)
}

// Decode detects a body's encoding (see EncodingOf) and decodes it into v.
// It returns the encoding, which replies and events should use.
func Decode(h nats.Header, body []byte, v any) (Encoding, error) {
	enc, err := EncodingOf(h, body)
	if err != nil {
		return "", err
	}
	return enc, Unmarshal(enc, body, v)
}
