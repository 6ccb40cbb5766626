// Package jsonschema derives JSON Schemas from Go types, reads the schemas
// others write, and validates decoded JSON values against them. The agent
// loop uses it to turn a tool function's input struct into the tool's
// parameter schema, and every tool — a Go function, an MCP server's tool,
// a tool service's endpoint — checks the arguments a model sends with it
// before the call, so the model reads the same messages wherever the tool
// lives.
//
// # Deriving
//
// [For] and [Reflect] derive a [*Schema] from a Go type, the way
// encoding/json reads that type:
//
//   - struct fields become properties named by their `json` tag, in Go
//     field order; `json:"-"` and unexported fields are skipped, and
//     embedded structs are flattened with encoding/json's rules (shallower
//     fields win, then tagged ones; names that stay ambiguous are dropped);
//   - a field is required unless its `json` tag has omitempty or omitzero,
//     or it is a pointer, or it is promoted through an embedded pointer;
//   - a `desc` tag becomes the description;
//   - bool is "boolean"; integer kinds are "integer" (int8 to int32 and
//     unsigned kinds also get their range as minimum and maximum); floats
//     are "number"; string is "string"; []byte is a base64 string;
//   - slices are "array" with items; arrays also fix minItems and maxItems
//     to their length;
//   - maps with string, integer or text-unmarshaler keys are "object" with
//     the values' schema as additionalProperties ([Schema.Values]);
//   - time.Time is a "date-time" string; json.RawMessage, interfaces and
//     other types implementing json.Unmarshaler admit any value; other
//     encoding.TextUnmarshaler types are strings; types implementing
//     [SchemaProvider] describe themselves;
//   - a pointer is its element's schema, nullable;
//   - the ",string" option of a `json` tag makes the field a string;
//   - channels, functions, complex numbers and unsafe pointers are errors:
//     a [*DeriveError] matching [ErrUnsupportedType] that names the field's
//     JSON path and Go name.
//
// # Constraints
//
// The `jsonschema` tag adds constraints as comma-separated key=value pairs:
//
//	type Input struct {
//		Query string   `json:"query" desc:"what to look for" jsonschema:"minLength=1,maxLength=200"`
//		Limit int      `json:"limit,omitempty" jsonschema:"minimum=1,maximum=50,default=10"`
//		Sort  string   `json:"sort,omitempty" jsonschema:"enum=relevance|date"`
//		Tags  []string `json:"tags,omitempty" jsonschema:"maxItems=5,pattern=^[a-z]+\\d?$"`
//	}
//
// The keys are minimum, maximum, exclusiveMinimum, exclusiveMaximum,
// minLength, maxLength, pattern, format, enum (values separated by |),
// minItems, maxItems and default, plus the flags required, optional and
// nullable that override the derived requiredness and nullability. Values
// are parsed as the field's type: a uint8 field's maximum must fit a uint8,
// an integer field's enum values must be integers. Value constraints of an
// array or map field apply to its elements (Tags above: each tag matches the
// pattern); minItems, maxItems and default apply to the field. A constraint
// that does not fit the type, an unknown key or a value that does not parse
// is a [*DeriveError] matching [ErrInvalidTag].
//
// Escaping: a backslash before a comma makes the comma part of the value
// (pattern=^a\\,b$ in the Go source, which reads ^a\,b$ once the tag is
// unquoted, is the pattern ^a,b$); a backslash before | does the same inside
// enum values. Every other backslash is kept as is: \d needs only the
// doubling that Go's tag quoting asks for (\\d in the source, as in Tags
// above; go vet reports a tag that does not unquote). A pattern is compiled
// once, at derivation.
//
// # Recursive types
//
// A type that contains itself is described once, under $defs, and referred
// to with $ref: "#/$defs/Node", or "#" when the recursive type is the root
// itself. Non-recursive nested types are written inline. A pointer type
// that points to itself has no JSON form and is an error.
//
// # Validation
//
// [Schema.Validate] checks a value as json.Unmarshal decodes it into an
// any. It reports every issue, not only the first, as a [*ValidationError]
// whose issues are sorted by path (items[2].name, meta["a.b"]): type
// mismatches ("expected integer, got string"; 2.0 is an integer, 1.5 is
// not), missing required properties ("is required"), properties rejected by
// additionalProperties false ("unknown field"), enum, numeric bounds,
// string lengths in runes, patterns, known formats, array lengths and
// items, recursively.
//
// [Schema.ValidateJSON] decodes and validates in one call.
//
// Derivation compiles the schema (patterns, enum sets, messages): validation
// walks precomputed checks with type switches, without reflection, and
// allocates nothing for a valid value apart from what some format checks
// need (email, uri, a date-time with an offset). Issues allocate their
// paths and messages. Hand-built schemas compile on first use; one that
// does not compile makes Validate return an error matching
// [ErrInvalidSchema]. A Schema is safe for concurrent use once used, and
// must not be modified after that: [Schema.Clone] returns a copy that may
// be.
//
// # Schemas written by others
//
// [Parse] reads the input schema of an MCP server's tool or a tool
// service's endpoint (drafts 2020-12 and 07: type lists, const, anyOf,
// oneOf, allOf, not, $defs and definitions, $ref to any JSON pointer in
// the document, prefixItems and draft 07 tuples) into the same [Schema].
// The rule for keywords it does not check (multipleOf, uniqueItems,
// if/then/else, patternProperties...) is to accept them and list them in
// [Schema.Unchecked]: the schema's owner validates its own input and is
// the judge of those. A $ref that leaves the document is an error.
//
// # Why not github.com/google/jsonschema-go
//
// The MCP SDK brings that package along, and it validates every keyword of
// draft 2020-12. Measured on the loop's cases (BENCHMARKS.md, "JSON
// Schema: ours vs google/jsonschema-go") it would not do as the one
// validator of tool arguments:
//
//   - its messages are written for programmers ("validating root:
//     validating /properties/limit: maximum: 99/1 is greater than
//     50.000000"), and it stops at the first fault: a model with three
//     wrong arguments would need three turns to learn of them; here it
//     reads "limit: must be <= 50; sort: must be one of ..." once;
//   - its For reads the `jsonschema` tag as the description and rejects
//     key=value in it, so no constraint (bounds, lengths, enum, pattern,
//     format, default) can come from a struct tag; pointers become
//     required, recursive types are an error, and there is no strict-mode
//     rewrite;
//   - it does not check formats (a "date" that is not a date passes);
//   - it validates valid tool arguments 26-56× slower, with 66-72
//     allocations where this package makes none, and invalid ones 3-5×
//     slower.
//
// # Strict mode
//
// [Schema.Strict] returns the copy that providers' strict modes (OpenAI
// structured outputs) require: every object lists all its properties as
// required and sets additionalProperties false; optional properties become
// nullable instead.
//
// # Encoding
//
// [Schema.MarshalJSON] writes standard JSON Schema, deterministically:
// keywords in a fixed order and properties in Go field order. [Schema.JSON]
// returns the cached encoding. Nullable types marshal as a type list
// (["integer","null"]), a nullable $ref as anyOf with {"type":"null"}.
//
// # Errors
//
// Every error matches one sentinel with errors.Is: [ErrUnsupportedType] and
// [ErrInvalidTag] from derivation (as a [*DeriveError] with the path),
// [ErrValidation] (as a [*ValidationError] with the issues),
// [ErrInvalidSchema] and [ErrInvalidJSON].
package jsonschema
