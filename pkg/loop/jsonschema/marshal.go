package jsonschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// MarshalJSON encodes s as standard JSON Schema, compactly and
// deterministically: keywords in a fixed order, properties in declaration
// order, $defs sorted by name. It fails only for Enum or Default values
// that JSON cannot encode.
func (s *Schema) MarshalJSON() ([]byte, error) {
	p := s.prepared()
	if p.jsonErr != nil {
		return nil, p.jsonErr
	}
	return bytes.Clone(p.json), nil
}

// JSON returns the cached encoding of [Schema.MarshalJSON], which the
// caller must not modify; nil if the schema cannot be encoded.
func (s *Schema) JSON() json.RawMessage { return s.prepared().json }

// String returns the JSON encoding, for printing.
func (s *Schema) String() string { return string(s.JSON()) }

func appendSchema(b []byte, s *Schema) ([]byte, error) {
	b = append(b, '{')
	w := objWriter{b: b}
	var err error
	if s.Ref != "" && s.Nullable {
		w.key("anyOf")
		w.b = append(w.b, `[{"$ref":`...)
		w.b = appendString(w.b, s.Ref)
		w.b = append(w.b, `},{"type":"null"}]`...)
	} else if s.Ref != "" {
		w.key("$ref")
		w.b = appendString(w.b, s.Ref)
	}
	if len(s.Types) > 0 {
		w.key("type")
		w.b = append(w.b, '[')
		for i, t := range s.Types {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = appendString(w.b, t)
		}
		if s.Nullable && !slices.Contains(s.Types, TypeNull) {
			w.b = append(w.b, `,"null"`...)
		}
		w.b = append(w.b, ']')
	} else if s.Type != "" {
		w.key("type")
		if s.Nullable && s.Type != TypeNull {
			w.b = append(w.b, '[')
			w.b = appendString(w.b, s.Type)
			w.b = append(w.b, `,"null"]`...)
		} else {
			w.b = appendString(w.b, s.Type)
		}
	}
	if s.Description != "" {
		w.key("description")
		w.b = appendString(w.b, s.Description)
	}
	if s.Enum != nil {
		w.key("enum")
		w.b = append(w.b, '[')
		hasNull := false
		for i, v := range s.Enum {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			hasNull = hasNull || v == nil
			if w.b, err = appendValue(w.b, v); err != nil {
				return nil, err
			}
		}
		if s.Nullable && !hasNull {
			if len(s.Enum) > 0 {
				w.b = append(w.b, ',')
			}
			w.b = append(w.b, "null"...)
		}
		w.b = append(w.b, ']')
	}
	if s.Default != nil {
		w.key("default")
		if w.b, err = appendValue(w.b, s.Default); err != nil {
			return nil, err
		}
	}
	w.str("format", s.Format)
	w.str("contentEncoding", s.ContentEncoding)
	w.str("pattern", s.Pattern)
	w.int("minLength", s.MinLength)
	w.int("maxLength", s.MaxLength)
	for _, kv := range [...]struct {
		key string
		val *float64
	}{
		{"minimum", s.Minimum},
		{"exclusiveMinimum", s.ExclusiveMinimum},
		{"maximum", s.Maximum},
		{"exclusiveMaximum", s.ExclusiveMaximum},
	} {
		if kv.val != nil {
			w.key(kv.key)
			if w.b, err = appendNumber(w.b, *kv.val); err != nil {
				return nil, err
			}
		}
	}
	if err := w.list("prefixItems", s.PrefixItems); err != nil {
		return nil, err
	}
	if s.Items != nil {
		w.key("items")
		if w.b, err = appendSchema(w.b, s.Items); err != nil {
			return nil, err
		}
	}
	w.int("minItems", s.MinItems)
	w.int("maxItems", s.MaxItems)
	if s.Properties != nil {
		w.key("properties")
		w.b = append(w.b, '{')
		for i, p := range s.Properties {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = appendString(w.b, p.Name)
			w.b = append(w.b, ':')
			if w.b, err = appendSchema(w.b, orEmpty(p.Schema)); err != nil {
				return nil, err
			}
		}
		w.b = append(w.b, '}')
	}
	if len(s.Required) > 0 {
		w.key("required")
		w.b = append(w.b, '[')
		for i, r := range s.Required {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = appendString(w.b, r)
		}
		w.b = append(w.b, ']')
	}
	switch {
	case s.AdditionalProperties != nil && !*s.AdditionalProperties:
		w.key("additionalProperties")
		w.b = append(w.b, "false"...)
	case s.Values != nil:
		w.key("additionalProperties")
		if w.b, err = appendSchema(w.b, s.Values); err != nil {
			return nil, err
		}
	case s.AdditionalProperties != nil:
		w.key("additionalProperties")
		w.b = append(w.b, "true"...)
	}
	for _, l := range [...]struct {
		key string
		ss  []*Schema
	}{{"allOf", s.AllOf}, {"anyOf", s.AnyOf}, {"oneOf", s.OneOf}} {
		if err := w.list(l.key, l.ss); err != nil {
			return nil, err
		}
	}
	if s.Not != nil {
		w.key("not")
		if w.b, err = appendSchema(w.b, s.Not); err != nil {
			return nil, err
		}
	}
	if len(s.Defs) > 0 {
		w.key("$defs")
		w.b = append(w.b, '{')
		names := make([]string, 0, len(s.Defs))
		for name := range s.Defs {
			names = append(names, name)
		}
		slices.Sort(names)
		for i, name := range names {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = appendString(w.b, name)
			w.b = append(w.b, ':')
			if w.b, err = appendSchema(w.b, orEmpty(s.Defs[name])); err != nil {
				return nil, err
			}
		}
		w.b = append(w.b, '}')
	}
	return append(w.b, '}'), nil
}

func orEmpty(s *Schema) *Schema {
	if s == nil {
		return &Schema{}
	}
	return s
}

// objWriter appends "key": pairs to an object already opened in b.
type objWriter struct {
	b    []byte
	more bool
}

func (w *objWriter) key(k string) {
	if w.more {
		w.b = append(w.b, ',')
	}
	w.more = true
	w.b = append(w.b, '"')
	w.b = append(w.b, k...)
	w.b = append(w.b, '"', ':')
}

// list appends a list of schemas, if there is one.
func (w *objWriter) list(k string, ss []*Schema) error {
	if ss == nil {
		return nil
	}
	w.key(k)
	w.b = append(w.b, '[')
	for i, s := range ss {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		var err error
		if w.b, err = appendSchema(w.b, orEmpty(s)); err != nil {
			return err
		}
	}
	w.b = append(w.b, ']')
	return nil
}

func (w *objWriter) str(k, v string) {
	if v != "" {
		w.key(k)
		w.b = appendString(w.b, v)
	}
}

func (w *objWriter) int(k string, v *int) {
	if v != nil {
		w.key(k)
		w.b = strconv.AppendInt(w.b, int64(*v), 10)
	}
}

// appendValue appends an Enum or Default value.
func appendValue(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, x), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case json.Number:
		if !json.Valid([]byte(x)) {
			return nil, fmt.Errorf("jsonschema: invalid json.Number %q", string(x))
		}
		return append(b, x...), nil
	}
	if f, ok := toFloat(v); ok {
		return appendNumber(b, f)
	}
	enc, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, enc...), nil
}

// appendNumber formats f as encoding/json does.
func appendNumber(b []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("jsonschema: %v has no JSON form", f)
	}
	abs, format := math.Abs(f), byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

// appendString appends s as a JSON string. Unlike encoding/json it leaves
// <, > and & alone, so descriptions stay readable.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
