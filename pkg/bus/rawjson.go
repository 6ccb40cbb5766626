package bus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"github.com/vmihailenco/msgpack/v5"
)

// RawJSON is a JSON value carried verbatim, such as a request's
// output_schema. In JSON it is inlined; in msgpack it is the equivalent
// native value (a map, not a string of JSON), so msgpack readers see the
// same structure. Empty means absent.
type RawJSON []byte

var (
	_ json.Marshaler             = RawJSON(nil)
	_ json.Unmarshaler           = (*RawJSON)(nil)
	_ msgpack.CustomEncoder      = RawJSON(nil)
	_ msgpack.CustomDecoder      = (*RawJSON)(nil)
	_ interface{ IsZero() bool } = RawJSON(nil)
)

// IsZero reports whether r is absent.
func (r RawJSON) IsZero() bool { return len(r) == 0 }

// MarshalJSON returns r, or null when r is empty.
func (r RawJSON) MarshalJSON() ([]byte, error) {
	if len(r) == 0 {
		return []byte("null"), nil
	}
	if !json.Valid(r) {
		return nil, fmt.Errorf("bus: RawJSON is not valid JSON")
	}
	return r, nil
}

// UnmarshalJSON stores a copy of b; null becomes empty.
func (r *RawJSON) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		*r = nil
		return nil
	}
	*r = append((*r)[:0], b...)
	return nil
}

// EncodeMsgpack writes r as the equivalent msgpack value.
func (r RawJSON) EncodeMsgpack(enc *msgpack.Encoder) error {
	if len(r) == 0 {
		return enc.EncodeNil()
	}
	v, err := jsonToValue(r)
	if err != nil {
		return err
	}
	return enc.Encode(v)
}

// DecodeMsgpack reads any msgpack value and stores it as JSON. Binary
// strings become base64 strings, as encoding/json writes []byte; values
// JSON cannot hold (NaN, infinities, non-string map keys) are errors.
func (r *RawJSON) DecodeMsgpack(dec *msgpack.Decoder) error {
	v, err := dec.DecodeInterfaceLoose()
	if err != nil {
		return err
	}
	if v == nil {
		*r = nil
		return nil
	}
	if err := jsonSafe(v, 0); err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	*r = b
	return nil
}

// jsonToValue decodes JSON with integers kept as int64 (or uint64) rather
// than float64, so a msgpack reader gets the same numbers.
func jsonToValue(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return numbersToGo(v), nil
}

func numbersToGo(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		if f, err := x.Float64(); err == nil {
			return f
		}
		return x.String()
	case map[string]any:
		for k, e := range x {
			x[k] = numbersToGo(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbersToGo(e)
		}
	}
	return v
}

// jsonSafe reports a value that json.Marshal would reject or mangle.
func jsonSafe(v any, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("bus: value nested deeper than %d", maxDepth)
	}
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("bus: %v has no JSON form", x)
		}
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("bus: %v has no JSON form", x)
		}
	case map[string]any:
		for _, e := range x {
			if err := jsonSafe(e, depth+1); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := jsonSafe(e, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}
