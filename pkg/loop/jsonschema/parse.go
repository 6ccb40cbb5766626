package jsonschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// uncheckedKeywords are the assertion keywords [Parse] accepts without
// checking them: the schema's owner (an MCP server, a tool service)
// validates its own input and remains the judge of these.
var uncheckedKeywords = []string{
	"$dynamicRef", "$recursiveRef", "contains", "dependencies", "dependentRequired",
	"dependentSchemas", "else", "if", "maxContains", "maxProperties", "minContains",
	"minProperties", "multipleOf", "patternProperties", "propertyNames", "then",
	"unevaluatedItems", "unevaluatedProperties", "uniqueItems",
}

// Parse reads a JSON Schema written by someone else, such as the input
// schema of an MCP server's tool or of a tool service's endpoint (drafts
// 2020-12, 2019-09 and 07; the boolean exclusiveMinimum of draft 04 and
// OpenAPI's nullable too), and compiles it: the result validates with the
// same code, and the same messages, as a schema derived from a Go type.
//
// Checked: type (a name or a list of names; "null" in a list makes the
// schema nullable), enum, const, the numeric bounds, minLength, maxLength,
// pattern, format (the formats [Schema.Format] lists), items (a schema, or
// a list of schemas in draft 07 with additionalItems), prefixItems,
// minItems, maxItems, properties, required, additionalProperties (false or
// a schema), allOf, anyOf, oneOf, not, and $ref to "#", to "#/$defs/name",
// "#/definitions/name" or any other JSON pointer into the document.
//
// Accepted and not checked: multipleOf, uniqueItems, minProperties,
// maxProperties, patternProperties, propertyNames, dependencies,
// dependentRequired, dependentSchemas, contains, minContains, maxContains,
// if/then/else, unevaluatedItems, unevaluatedProperties, $dynamicRef and
// $recursiveRef. They are listed in [Schema.Unchecked], so a caller can
// say so; the schema's owner checks its own input. Annotations (title,
// examples, $schema, $id, $comment, readOnly...) and unknown keywords are
// ignored; only description, default and contentEncoding are kept.
//
// A document that is not a JSON Schema (a keyword of the wrong JSON type,
// an unknown type name, a pattern that does not compile, a $ref that
// leaves the document or names nothing, a cycle of $ref that never reaches
// a value) is an error matching [ErrInvalidSchema].
func Parse(data []byte) (*Schema, error) {
	p := &parser{pointers: map[string]*Schema{}, unchecked: map[string]bool{}}
	s, err := p.schema(json.RawMessage(data), "#")
	if err != nil {
		return nil, err
	}
	s.pointers = p.pointers
	for k := range p.unchecked {
		s.Unchecked = append(s.Unchecked, k)
	}
	slices.Sort(s.Unchecked)
	if err := s.prepared().err; err != nil {
		return nil, err
	}
	return s, nil
}

type parser struct {
	pointers  map[string]*Schema // every subschema by its JSON pointer ("#/properties/a")
	unchecked map[string]bool
}

func (p *parser) fail(at, detail string, cause error) error {
	if cause != nil {
		return fmt.Errorf("%w: %s: %s: %w", ErrInvalidSchema, at, detail, cause)
	}
	return fmt.Errorf("%w: %s: %s", ErrInvalidSchema, at, detail)
}

// member is one key of a JSON object, in document order.
type member struct {
	key string
	raw json.RawMessage
}

// members reads a JSON object's members in order (the first of a repeated
// key wins, as in compile); ok is false for a value that is not an object.
func members(raw json.RawMessage) (ms []member, ok bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, false, err
	}
	if d, isDelim := tok.(json.Delim); !isDelim || d != '{' {
		return nil, false, nil
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, true, err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, true, err
		}
		if !seen[key] {
			seen[key] = true
			ms = append(ms, member{key, v})
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, true, err
	}
	return ms, true, nil
}

// escapePointer escapes a key as a JSON pointer token.
func escapePointer(key string) string {
	if !strings.ContainsAny(key, "~/") {
		return key
	}
	return pointerEscaper.Replace(key)
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func (p *parser) schema(raw json.RawMessage, at string) (*Schema, error) {
	raw = bytes.TrimSpace(raw)
	switch string(raw) {
	case "true":
		s := &Schema{}
		p.pointers[at] = s
		return s, nil
	case "false":
		s := &Schema{Not: &Schema{}}
		p.pointers[at] = s
		return s, nil
	}
	ms, ok, err := members(raw)
	if err != nil {
		return nil, p.fail(at, "not JSON", err)
	}
	if !ok {
		return nil, p.fail(at, "a schema is an object or a boolean, not "+abbrev(raw), nil)
	}
	s := &Schema{}
	p.pointers[at] = s
	var exclMin, exclMax bool // draft 04's boolean forms
	var items, additionalItems json.RawMessage
	for _, m := range ms {
		k, v, here := m.key, m.raw, at+"/"+escapePointer(m.key)
		var err error
		switch k {
		case "$ref":
			err = p.str(v, here, &s.Ref)
		case "type":
			err = p.types(s, v, here)
		case "nullable":
			err = json.Unmarshal(v, &s.Nullable)
		case "description":
			err = p.str(v, here, &s.Description)
		case "enum":
			err = p.values(v, &s.Enum)
		case "const":
			var c any
			if err = p.value(v, &c); err == nil {
				s.Enum = []any{c}
			}
		case "default":
			err = p.value(v, &s.Default)
		case "format":
			err = p.str(v, here, &s.Format)
		case "contentEncoding":
			err = p.str(v, here, &s.ContentEncoding)
		case "pattern":
			err = p.str(v, here, &s.Pattern)
		case "minLength":
			s.MinLength, err = p.count(v)
		case "maxLength":
			s.MaxLength, err = p.count(v)
		case "minItems":
			s.MinItems, err = p.count(v)
		case "maxItems":
			s.MaxItems, err = p.count(v)
		case "minimum":
			s.Minimum, err = p.number(v)
		case "maximum":
			s.Maximum, err = p.number(v)
		case "exclusiveMinimum":
			if string(bytes.TrimSpace(v)) == "true" || string(bytes.TrimSpace(v)) == "false" {
				err = json.Unmarshal(v, &exclMin)
			} else {
				s.ExclusiveMinimum, err = p.number(v)
			}
		case "exclusiveMaximum":
			if string(bytes.TrimSpace(v)) == "true" || string(bytes.TrimSpace(v)) == "false" {
				err = json.Unmarshal(v, &exclMax)
			} else {
				s.ExclusiveMaximum, err = p.number(v)
			}
		case "items":
			items = v
		case "additionalItems":
			additionalItems = v
		case "prefixItems":
			s.PrefixItems, err = p.list(v, here)
		case "properties":
			err = p.properties(s, v, here)
		case "required":
			err = json.Unmarshal(v, &s.Required)
		case "additionalProperties":
			switch string(bytes.TrimSpace(v)) {
			case "false":
				s.AdditionalProperties = ptr(false)
			case "true":
				s.AdditionalProperties = ptr(true)
			default:
				s.Values, err = p.schema(v, here)
			}
		case "$defs", "definitions":
			err = p.defs(s, k, v, here)
		case "allOf":
			s.AllOf, err = p.list(v, here)
		case "anyOf":
			s.AnyOf, err = p.list(v, here)
		case "oneOf":
			s.OneOf, err = p.list(v, here)
		case "not":
			s.Not, err = p.schema(v, here)
		default:
			if _, found := slices.BinarySearch(uncheckedKeywords, k); found {
				p.unchecked[k] = true
			}
		}
		if err != nil {
			return nil, p.fail(here, "invalid "+k, err)
		}
	}
	if exclMin && s.Minimum != nil {
		s.ExclusiveMinimum, s.Minimum = s.Minimum, nil
	}
	if exclMax && s.Maximum != nil {
		s.ExclusiveMaximum, s.Maximum = s.Maximum, nil
	}
	if items != nil {
		if bytes.HasPrefix(bytes.TrimSpace(items), []byte("[")) {
			// Draft 07's tuple form: additionalItems is the rest.
			if s.PrefixItems, err = p.list(items, at+"/items"); err != nil {
				return nil, err
			}
			if additionalItems != nil {
				if s.Items, err = p.schema(additionalItems, at+"/additionalItems"); err != nil {
					return nil, err
				}
			}
		} else if s.Items, err = p.schema(items, at+"/items"); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (p *parser) str(v json.RawMessage, at string, dst *string) error {
	if err := json.Unmarshal(v, dst); err != nil {
		return fmt.Errorf("not a string: %s", abbrev(v))
	}
	return nil
}

func (p *parser) types(s *Schema, v json.RawMessage, at string) error {
	var names []string
	if bytes.HasPrefix(bytes.TrimSpace(v), []byte("[")) {
		if err := json.Unmarshal(v, &names); err != nil {
			return fmt.Errorf("not a type name or a list of them: %s", abbrev(v))
		}
	} else {
		var one string
		if err := json.Unmarshal(v, &one); err != nil {
			return fmt.Errorf("not a type name or a list of them: %s", abbrev(v))
		}
		names = []string{one}
	}
	var rest []string
	for _, n := range names {
		if _, ok := typeSetOf(n); !ok || n == "" {
			return fmt.Errorf("unknown type %q", n)
		}
		if n == TypeNull && len(names) > 1 {
			s.Nullable = true
			continue
		}
		if !slices.Contains(rest, n) {
			rest = append(rest, n)
		}
	}
	switch len(rest) {
	case 0: // an empty list admits nothing
		s.Not = &Schema{}
	case 1:
		s.Type = rest[0]
	default:
		s.Types = rest
	}
	return nil
}

func (p *parser) value(v json.RawMessage, dst *any) error {
	return json.Unmarshal(v, dst)
}

func (p *parser) values(v json.RawMessage, dst *[]any) error {
	if err := json.Unmarshal(v, dst); err != nil {
		return fmt.Errorf("not a list: %s", abbrev(v))
	}
	if *dst == nil {
		*dst = []any{}
	}
	return nil
}

func (p *parser) count(v json.RawMessage) (*int, error) {
	f, err := p.number(v)
	if err != nil {
		return nil, err
	}
	if *f < 0 || *f != float64(int(*f)) {
		return nil, fmt.Errorf("not a non-negative integer: %s", abbrev(v))
	}
	return ptr(int(*f)), nil
}

func (p *parser) number(v json.RawMessage) (*float64, error) {
	var f float64
	if err := json.Unmarshal(v, &f); err != nil {
		return nil, fmt.Errorf("not a number: %s", abbrev(v))
	}
	return &f, nil
}

func (p *parser) list(v json.RawMessage, at string) ([]*Schema, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal(v, &raws); err != nil {
		return nil, fmt.Errorf("not a list of schemas: %s", abbrev(v))
	}
	out := make([]*Schema, len(raws))
	for i, r := range raws {
		var err error
		if out[i], err = p.schema(r, at+"/"+strconv.Itoa(i)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (p *parser) properties(s *Schema, v json.RawMessage, at string) error {
	ms, ok, err := members(v)
	if err != nil || !ok {
		return fmt.Errorf("not an object of schemas: %s", abbrev(v))
	}
	s.Properties = make([]Property, 0, len(ms))
	for _, m := range ms {
		ps, err := p.schema(m.raw, at+"/"+escapePointer(m.key))
		if err != nil {
			return err
		}
		s.Properties = append(s.Properties, Property{Name: m.key, Schema: ps})
	}
	return nil
}

func (p *parser) defs(s *Schema, keyword string, v json.RawMessage, at string) error {
	ms, ok, err := members(v)
	if err != nil || !ok {
		return fmt.Errorf("not an object of schemas: %s", abbrev(v))
	}
	for _, m := range ms {
		d, err := p.schema(m.raw, at+"/"+escapePointer(m.key))
		if err != nil {
			return err
		}
		if keyword == "$defs" {
			if s.Defs == nil {
				s.Defs = map[string]*Schema{}
			}
			s.Defs[m.key] = d
		}
	}
	return nil
}

// resolvePointer finds a $ref's target among the parsed document's
// subschemas: "#/definitions/a", "#/properties/x/items", with JSON pointer
// escapes and percent-encoding.
func (s *Schema) resolvePointer(ref string) (*Schema, bool) {
	if s.pointers == nil {
		return nil, false
	}
	if d, ok := s.pointers[ref]; ok {
		return d, true
	}
	if un, err := url.PathUnescape(ref); err == nil {
		d, ok := s.pointers[un]
		return d, ok
	}
	return nil, false
}

// abbrev quotes a JSON value for an error message, shortened.
func abbrev(v json.RawMessage) string {
	const max = 40
	s := string(bytes.TrimSpace(v))
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}
