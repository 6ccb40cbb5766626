package jsonschema

import (
	"regexp"
	"sync"
)

// Type names of JSON Schema, as used in [Schema.Type].
const (
	TypeString  = "string"
	TypeInteger = "integer"
	TypeNumber  = "number"
	TypeBoolean = "boolean"
	TypeArray   = "array"
	TypeObject  = "object"
	TypeNull    = "null"
)

// Schema is a JSON Schema: the subset a Go type can describe, which is what
// model providers accept for tool parameters, plus the combinators and type
// lists [Parse] reads from schemas others write. The zero value accepts any
// JSON value.
//
// A Schema is derived with [For] or [Reflect], parsed with [Parse], or
// built by hand. It must
// not be modified after its first use ([Schema.Validate], [Schema.JSON],
// [Schema.MarshalJSON]): the first use compiles it and caches the result.
// [Schema.Clone] and [Schema.Strict] return copies that may be modified.
// After the first use a Schema is safe for concurrent use.
//
// Only the root of a tree may carry [Schema.Defs]; references resolve
// against the root the schema is used from ("#" is that root).
type Schema struct {
	// Ref is a reference to another schema: "#" for the root or
	// "#/$defs/Name" for an entry of the root's Defs. Other keywords of a
	// node with a Ref apply in addition to the referenced schema.
	Ref string
	// Type is one of the Type constants, or "" for any type.
	Type string
	// Types lists several admitted types (without "null": see Nullable);
	// when set, Type is "". Derived schemas never set it; [Parse] does for
	// a type list such as ["string","number"].
	Types []string
	// Nullable also admits null. It marshals as a type list such as
	// ["integer","null"] (or anyOf with {"type":"null"} next to a Ref).
	Nullable bool
	// Description tells the model what the value means.
	Description string
	// Enum lists the admitted values: strings, float64 numbers, booleans
	// (other Go numbers are accepted and compared as float64).
	Enum []any
	// Default is an annotation only: validation ignores it.
	Default any
	// Format names a string format. date-time, date, time, email, uuid,
	// uri, ipv4 and ipv6 are checked; other names are annotations only.
	Format string
	// ContentEncoding annotates strings carrying binary data ("base64").
	ContentEncoding string
	// Pattern is a regular expression (RE2 syntax) a string must match
	// somewhere; anchor it with ^ and $ to match the whole string.
	Pattern string
	// MinLength and MaxLength bound a string's length in runes.
	MinLength, MaxLength *int
	// Minimum, Maximum, ExclusiveMinimum and ExclusiveMaximum bound a number.
	Minimum, Maximum                   *float64
	ExclusiveMinimum, ExclusiveMaximum *float64
	// PrefixItems are the schemas of an array's first elements, in order;
	// Items then applies to the elements after them.
	PrefixItems []*Schema
	// Items is the schema of every element of an array (after PrefixItems).
	Items *Schema
	// MinItems and MaxItems bound an array's length.
	MinItems, MaxItems *int
	// Properties are an object's known properties, in declaration order
	// (Go field order for derived schemas). A non-nil empty slice marshals
	// as "properties":{}, which providers expect of argument objects.
	Properties []Property
	// Required lists the properties that must be present.
	Required []string
	// AdditionalProperties false rejects properties not listed in
	// Properties; nil or true admits them. False takes precedence over
	// Values.
	AdditionalProperties *bool
	// Values is the schema of every property not listed in Properties: the
	// values of a Go map. It marshals as "additionalProperties": {...}.
	Values *Schema
	// Defs holds named schemas referenced as "#/$defs/Name" (derivation
	// puts recursive types here). Only the root's Defs are used.
	Defs map[string]*Schema
	// AllOf, AnyOf and OneOf admit a value that matches all, at least one,
	// or exactly one of their schemas; Not admits one that does not match
	// its schema. Derived schemas never set them; [Parse] does.
	AllOf, AnyOf, OneOf []*Schema
	Not                 *Schema
	// Unchecked lists, at the root, the assertion keywords [Parse] found
	// in the document and does not check (multipleOf, uniqueItems...),
	// sorted. Empty for derived schemas.
	Unchecked []string

	once     sync.Once
	pointers map[string]*Schema // a parsed document's subschemas by JSON pointer
	prep     *prepared
	re       *regexp.Regexp // compiled Pattern, set by derivation
}

// Property is a named entry of [Schema.Properties].
type Property struct {
	Name   string
	Schema *Schema
}

// Property returns the schema of the named property, or nil.
func (s *Schema) Property(name string) *Schema {
	for i := range s.Properties {
		if s.Properties[i].Name == name {
			return s.Properties[i].Schema
		}
	}
	return nil
}

// IsRequired reports whether the named property is listed in Required.
func (s *Schema) IsRequired(name string) bool {
	for _, r := range s.Required {
		if r == name {
			return true
		}
	}
	return false
}

// Clone returns a deep copy of s that may be modified. Enum and Default
// values are shared: they are treated as immutable.
func (s *Schema) Clone() *Schema {
	if s == nil {
		return nil
	}
	c := &Schema{
		Ref:                  s.Ref,
		Type:                 s.Type,
		Types:                cloneSlice(s.Types),
		Nullable:             s.Nullable,
		Description:          s.Description,
		Enum:                 cloneSlice(s.Enum),
		Default:              s.Default,
		Format:               s.Format,
		ContentEncoding:      s.ContentEncoding,
		Pattern:              s.Pattern,
		MinLength:            clonePtr(s.MinLength),
		MaxLength:            clonePtr(s.MaxLength),
		Minimum:              clonePtr(s.Minimum),
		Maximum:              clonePtr(s.Maximum),
		ExclusiveMinimum:     clonePtr(s.ExclusiveMinimum),
		ExclusiveMaximum:     clonePtr(s.ExclusiveMaximum),
		PrefixItems:          cloneSchemas(s.PrefixItems),
		Items:                s.Items.Clone(),
		MinItems:             clonePtr(s.MinItems),
		MaxItems:             clonePtr(s.MaxItems),
		Required:             cloneSlice(s.Required),
		AdditionalProperties: clonePtr(s.AdditionalProperties),
		Values:               s.Values.Clone(),
		AllOf:                cloneSchemas(s.AllOf),
		AnyOf:                cloneSchemas(s.AnyOf),
		OneOf:                cloneSchemas(s.OneOf),
		Not:                  s.Not.Clone(),
		Unchecked:            cloneSlice(s.Unchecked),
		pointers:             s.pointers, // JSON pointer $refs still resolve into the original
		re:                   s.re,
	}
	if s.Properties != nil {
		c.Properties = make([]Property, len(s.Properties))
		for i, p := range s.Properties {
			c.Properties[i] = Property{Name: p.Name, Schema: p.Schema.Clone()}
		}
	}
	if s.Defs != nil {
		c.Defs = make(map[string]*Schema, len(s.Defs))
		for name, d := range s.Defs {
			c.Defs[name] = d.Clone()
		}
	}
	return c
}

func cloneSchemas(ss []*Schema) []*Schema {
	if ss == nil {
		return nil
	}
	out := make([]*Schema, len(ss))
	for i, s := range ss {
		out[i] = s.Clone()
	}
	return out
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func cloneSlice[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}

func ptr[T any](v T) *T { return &v }
