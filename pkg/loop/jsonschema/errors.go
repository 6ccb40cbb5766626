package jsonschema

import (
	"errors"
	"reflect"
	"strings"
)

// Sentinel errors. Every error of this package matches exactly one of them
// with errors.Is.
var (
	// ErrUnsupportedType: the Go type (or one of its fields) has no JSON
	// Schema: channels, functions, complex numbers, unsafe pointers, maps
	// with keys that are not strings, integers or text unmarshalers, and
	// pointer types that point to themselves. Returned by [For] and
	// [Reflect] inside a [*DeriveError].
	ErrUnsupportedType = errors.New("jsonschema: unsupported type")
	// ErrInvalidTag: a `jsonschema` struct tag has an unknown key, a value
	// that does not parse as the field's type, a constraint that does not
	// apply to the field's type, or a pattern that does not compile.
	// Returned by [For] and [Reflect] inside a [*DeriveError].
	ErrInvalidTag = errors.New("jsonschema: invalid struct tag")
	// ErrInvalidSchema: a hand-built [Schema] cannot be compiled (unknown
	// type name, bad pattern, unresolvable or cyclic $ref). Returned by
	// [Schema.Validate].
	ErrInvalidSchema = errors.New("jsonschema: invalid schema")
	// ErrValidation: the value does not match the schema. Returned by
	// [Schema.Validate] as a [*ValidationError] listing every issue.
	ErrValidation = errors.New("jsonschema: validation failed")
	// ErrInvalidJSON: [Schema.ValidateJSON] was given bytes that are not
	// JSON; the decoder's error is wrapped too.
	ErrInvalidJSON = errors.New("jsonschema: invalid JSON")
)

// DeriveError reports why a Go type cannot be described, and where.
// It matches [ErrUnsupportedType] or [ErrInvalidTag] with errors.Is, and
// its Cause (a regexp or strconv error, say) too.
type DeriveError struct {
	// Path is the JSON path of the value inside the derived schema, such as
	// "items[].handler" ("" for the root type).
	Path string
	// Field is the Go field, such as "Item.Handler" ("" for the root type).
	Field string
	// Type is the Go type that could not be described.
	Type reflect.Type
	// Err is ErrUnsupportedType or ErrInvalidTag.
	Err error
	// Detail says what is wrong in words.
	Detail string
	// Cause is the underlying error, if any.
	Cause error
}

func (e *DeriveError) Error() string {
	var b strings.Builder
	b.WriteString(e.Err.Error())
	b.WriteString(": ")
	switch {
	case e.Path == "" && e.Field == "":
		b.WriteString("root type")
	case e.Field == "":
		b.WriteString(e.Path)
	default:
		b.WriteString(e.Path)
		b.WriteString(" (field ")
		b.WriteString(e.Field)
		b.WriteString(")")
	}
	if e.Type != nil {
		b.WriteString(" of type ")
		b.WriteString(e.Type.String())
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	if e.Cause != nil {
		b.WriteString(": ")
		b.WriteString(e.Cause.Error())
	}
	return b.String()
}

// Unwrap returns the sentinel and the cause.
func (e *DeriveError) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Cause}
}

// Issue is one way a value fails its schema.
type Issue struct {
	// Path locates the value: "" for the root, then property names and
	// indexes such as items[2].name; names that are not plain identifiers
	// are quoted: meta["a.b"].
	Path string
	// Reason says what is wrong, such as "expected integer, got string" or
	// "is required".
	Reason string
}

// String renders the issue as "path: reason" (just the reason at the root).
func (i Issue) String() string {
	if i.Path == "" {
		return i.Reason
	}
	return i.Path + ": " + i.Reason
}

// ValidationError lists every issue found in a value, sorted by path
// (indexes in numeric order). It matches [ErrValidation] with errors.Is.
type ValidationError struct {
	Issues []Issue
}

// Error joins the issues with "; ", for example
// "a: expected integer, got string; b: is required".
func (e *ValidationError) Error() string {
	if len(e.Issues) == 0 {
		return ErrValidation.Error()
	}
	var b strings.Builder
	for i, is := range e.Issues {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(is.String())
	}
	return b.String()
}

// Is reports whether target is ErrValidation.
func (e *ValidationError) Is(target error) bool { return target == ErrValidation }
