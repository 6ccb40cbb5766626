package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// readBody reads a request body of at most MaxBodyBytes; a larger one is a
// 413.
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *httpError) {
	limit := g.cfg.MaxBodyBytes
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, tooLarge(limit)
	case err != nil:
		return nil, invalidRequest(http.StatusBadRequest, "reading the request body failed: "+err.Error(), "")
	}
	return body, nil
}

func tooLarge(limit int64) *httpError {
	return invalidRequest(http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is over the %d-byte limit", limit),
		"send a smaller body: a long conversation belongs in a session (session_id), not in every request")
}

const hintEncoding = "send JSON with Content-Type: application/json, or msgpack with Content-Type: application/msgpack"

// contentType returns the request's Content-Type as the header the bus
// codecs read.
func contentType(r *http.Request) nats.Header {
	h := nats.Header{}
	if ct := r.Header.Get("Content-Type"); ct != "" && !isFormDefault(ct) {
		h.Set(bus.HeaderContentType, ct)
	}
	return h
}

// isFormDefault reports the Content-Type curl sends with -d when none is
// given; such a body is sniffed (JSON when it starts with '{').
func isFormDefault(ct string) bool {
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct)), "application/x-www-form-urlencoded")
}

// encodingOf returns a body's encoding (docs/protocol.md#encodings): the one
// its Content-Type names, else JSON when the body is a JSON object. Another
// Content-Type is a 415.
func encodingOf(r *http.Request, body []byte) (bus.Encoding, *httpError) {
	enc, err := bus.EncodingOf(contentType(r), body)
	if err == nil {
		return enc, nil
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		return "", invalidRequest(http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type %q is not supported", ct), hintEncoding)
	}
	return "", invalidRequest(http.StatusBadRequest, "the body is neither a JSON object nor a msgpack map", hintEncoding)
}

// decodeBody decodes a control request's body into v. An empty body leaves
// v as it is (the caller's Validate decides whether that is enough). what
// names the body in errors and example shows a valid one.
func decodeBody(r *http.Request, body []byte, v any, what, example string) *httpError {
	if len(body) == 0 {
		return nil
	}
	enc, herr := encodingOf(r, body)
	if herr != nil {
		return herr
	}
	if err := bus.Unmarshal(enc, body, v); err != nil {
		return decodeError(enc, what, example, err)
	}
	return nil
}

// decodeError says what is wrong with a body that does not decode, and
// what a valid one looks like.
func decodeError(enc bus.Encoding, what, example string, err error) *httpError {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var detail string
	switch {
	case errors.As(err, &syn):
		detail = fmt.Sprintf("invalid JSON at byte %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "the body"
		}
		detail = fmt.Sprintf("%s: got a JSON %s, want %s", field, typ.Value, kindName(typ.Type))
	default:
		var de *bus.DecodeError
		if errors.As(err, &de) {
			err = de.Err
		}
		detail = strings.TrimPrefix(err.Error(), bus.ErrMalformed.Error()+": ")
	}
	hint := "send an object such as " + example
	if enc == bus.Msgpack {
		hint = "send a msgpack map with the fields of the JSON object " + example
	}
	return invalidRequest(http.StatusBadRequest, fmt.Sprintf("the body is not a valid %s (%s): %s", what, enc, detail), hint)
}

func kindName(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

// withHint gives an invalid-request error that has no hint one.
func withHint(err error, hint string) error {
	he := *errorOf(err)
	if he.body.Type == bus.TypeInvalidRequest && he.body.Hint == "" {
		he.body.Hint = hint
	}
	return &he
}
