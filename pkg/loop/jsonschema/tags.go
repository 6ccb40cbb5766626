package jsonschema

import (
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// applyTag applies a `jsonschema` tag to fs, the schema of a field of Go
// type t, and returns whether the field is required. Value constraints
// (enum, bounds, lengths, pattern, format) go to the elements of arrays and
// maps; minItems, maxItems and default stay on the field itself.
func (d *deriver) applyTag(fs *Schema, t reflect.Type, tag string, required bool, at loc) (bool, error) {
	bad := func(detail string, cause error) error {
		return d.fail(at, t, ErrInvalidTag, detail, cause)
	}
	target, et := valueTarget(fs, t)
	seen := map[string]bool{}
	for _, item := range splitEscaped(tag, ',') {
		key, val, hasVal := strings.Cut(item, "=")
		key = strings.TrimSpace(key)
		if key == "" {
			continue
		}
		if seen[key] {
			return required, bad("duplicate key "+strconv.Quote(key), nil)
		}
		seen[key] = true
		switch key {
		case "required", "optional", "nullable":
			if hasVal {
				return required, bad(key+" takes no value", nil)
			}
		default:
			if !hasVal || val == "" {
				return required, bad(key+" needs a value: "+key+"=...", nil)
			}
		}
		var err error
		switch key {
		case "required":
			required = true
		case "optional":
			required = false
		case "nullable":
			if fs.Type != "" || fs.Ref != "" {
				fs.Nullable = true
			}
		case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
			if target.Type != TypeInteger && target.Type != TypeNumber {
				return required, bad(key+" applies to numbers only", nil)
			}
			var n float64
			if n, err = parseNumber(val, target.Type, et); err != nil {
				return required, bad(key+" value "+strconv.Quote(val), err)
			}
			switch key {
			case "minimum":
				target.Minimum = &n
			case "maximum":
				target.Maximum = &n
			case "exclusiveMinimum":
				target.ExclusiveMinimum = &n
			default:
				target.ExclusiveMaximum = &n
			}
		case "minLength", "maxLength":
			if target.Type != TypeString {
				return required, bad(key+" applies to strings only", nil)
			}
			var n int
			if n, err = parseCount(val); err != nil {
				return required, bad(key+" value "+strconv.Quote(val), err)
			}
			if key == "minLength" {
				target.MinLength = &n
			} else {
				target.MaxLength = &n
			}
		case "pattern":
			if target.Type != TypeString {
				return required, bad("pattern applies to strings only", nil)
			}
			re, err := regexp.Compile(val)
			if err != nil {
				return required, bad("pattern does not compile", err)
			}
			target.Pattern, target.re = val, re
		case "format":
			if target.Type != TypeString {
				return required, bad("format applies to strings only", nil)
			}
			target.Format = val
		case "enum":
			switch target.Type {
			case TypeString, TypeInteger, TypeNumber, TypeBoolean:
			default:
				return required, bad("enum applies to strings, numbers and booleans only", nil)
			}
			target.Enum = target.Enum[:0]
			for _, v := range splitEscaped(val, '|') {
				ev, err := parseScalar(v, target.Type, et)
				if err != nil {
					return required, bad("enum value "+strconv.Quote(v), err)
				}
				target.Enum = append(target.Enum, ev)
			}
		case "minItems", "maxItems":
			if fs.Type != TypeArray {
				return required, bad(key+" applies to slices and arrays only", nil)
			}
			var n int
			if n, err = parseCount(val); err != nil {
				return required, bad(key+" value "+strconv.Quote(val), err)
			}
			if key == "minItems" {
				fs.MinItems = &n
			} else {
				fs.MaxItems = &n
			}
		case "default":
			ft := t
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if fs.Default, err = parseDefault(val, fs.Type, ft); err != nil {
				return required, bad("default value "+strconv.Quote(val), err)
			}
		default:
			return required, bad("unknown key "+strconv.Quote(key), nil)
		}
	}
	return required, nil
}

// valueTarget descends from a field's schema through arrays and maps to the
// schema of the values, along with their Go type.
func valueTarget(s *Schema, t reflect.Type) (*Schema, reflect.Type) {
	for {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch {
		case s.Type == TypeArray && s.Items != nil:
			s, t = s.Items, t.Elem()
		case s.Type == TypeObject && s.Values != nil:
			s, t = s.Values, t.Elem()
		default:
			return s, t
		}
	}
}

// splitEscaped splits s at sep; a backslash before sep makes it literal.
// Other backslashes are kept as they are (so \d in a pattern needs no
// doubling).
func splitEscaped(s string, sep byte) []string {
	var (
		out []string
		cur []byte
	)
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == sep:
			cur = append(cur, sep)
			i++
		case s[i] == sep:
			out = append(out, string(cur))
			cur = cur[:0]
		default:
			cur = append(cur, s[i])
		}
	}
	return append(out, string(cur))
}

func parseCount(val string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(val))
	if err == nil && n < 0 {
		return 0, errNegative
	}
	return n, err
}

var errNegative = errors.New("must not be negative")

// parseNumber parses val as a number of the field's Go type t, so the
// bounds of a uint8 field must fit a uint8.
func parseNumber(val, typ string, t reflect.Type) (float64, error) {
	val = strings.TrimSpace(val)
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, err := strconv.ParseInt(val, 10, t.Bits())
		return float64(i), err
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u, err := strconv.ParseUint(val, 10, t.Bits())
		return float64(u), err
	case reflect.Float32, reflect.Float64:
		return strconv.ParseFloat(val, t.Bits())
	}
	// A type describing itself: parse by the schema type.
	f, err := strconv.ParseFloat(val, 64)
	if err == nil && typ == TypeInteger && f != float64(int64(f)) {
		return 0, strconv.ErrSyntax
	}
	return f, err
}

// parseScalar parses an enum or default value of a scalar schema type.
func parseScalar(val, typ string, t reflect.Type) (any, error) {
	switch typ {
	case TypeString:
		return val, nil
	case TypeBoolean:
		return strconv.ParseBool(strings.TrimSpace(val))
	default:
		return parseNumber(val, typ, t)
	}
}

// parseDefault parses a default value: scalars by the field type, anything
// else as JSON.
func parseDefault(val, typ string, t reflect.Type) (any, error) {
	switch typ {
	case TypeString, TypeBoolean, TypeInteger, TypeNumber:
		return parseScalar(val, typ, t)
	}
	var v any
	err := json.Unmarshal([]byte(val), &v)
	return v, err
}
