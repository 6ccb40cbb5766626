package jsonschema_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop/jsonschema"
)

func mustParse(t testing.TB, doc string) *jsonschema.Schema {
	t.Helper()
	s, err := jsonschema.Parse([]byte(doc))
	require.NoError(t, err, doc)
	return s
}

// TestParseKeywords checks each keyword Parse promises to check, on the
// kind of schema MCP servers send, with the message the model reads.
func TestParseKeywords(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, schema, value, want string // want "" means valid
	}{
		{"type list with null admits null", `{"type":["string","null"]}`, `null`, ""},
		{"type list with null rejects a number", `{"type":["string","null"]}`, `1`, "expected string or null, got number"},
		{"several types", `{"type":["string","integer"]}`, `1.5`, "expected string or integer, got number"},
		{"OpenAPI nullable", `{"type":"integer","nullable":true}`, `null`, ""},
		{"enum", `{"enum":["a","b"]}`, `"c"`, `must be one of "a", "b"`},
		{"const", `{"const":"on"}`, `"off"`, `must be one of "on"`},
		{"format uri", `{"type":"string","format":"uri"}`, `"not a uri"`, "must be a valid uri"},
		{"unknown format is an annotation", `{"type":"string","format":"hostname-ish"}`, `"x"`, ""},
		{"draft 04 exclusiveMinimum", `{"type":"number","minimum":0,"exclusiveMinimum":true}`, `0`, "must be > 0"},
		{"draft 2020 exclusiveMinimum", `{"type":"number","exclusiveMinimum":0}`, `0`, "must be > 0"},
		{"additionalProperties false", `{"type":"object","properties":{"a":{}},"additionalProperties":false}`, `{"a":1,"b":2}`, "b: unknown field"},
		{"additionalProperties schema", `{"type":"object","additionalProperties":{"type":"integer"}}`, `{"x":"1"}`, "x: expected integer, got string"},
		{"$defs and $ref", `{"$defs":{"n":{"type":"integer"}},"properties":{"a":{"$ref":"#/$defs/n"}}}`, `{"a":"x"}`, "a: expected integer, got string"},
		{"draft 07 definitions", `{"definitions":{"n":{"type":"integer"}},"properties":{"a":{"$ref":"#/definitions/n"}}}`, `{"a":"x"}`, "a: expected integer, got string"},
		{"pointer into properties", `{"properties":{"a":{"type":"integer"},"b":{"$ref":"#/properties/a"}}}`, `{"b":"x"}`, "b: expected integer, got string"},
		{"percent-encoded pointer", `{"$defs":{"a b":{"type":"integer"}},"properties":{"x":{"$ref":"#/$defs/a%20b"}}}`, `{"x":"1"}`, "x: expected integer, got string"},
		{"recursive", `{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#"}},"v":{"type":"integer"}}}`, `{"kids":[{"v":1},{"v":"2"}]}`, "kids[1].v: expected integer, got string"},
		{"allOf", `{"allOf":[{"required":["a"]},{"required":["b"]}]}`, `{}`, "a: is required; b: is required"},
		{"anyOf matched", `{"anyOf":[{"type":"string"},{"type":"integer"}]}`, `3`, ""},
		{"anyOf no type fits", `{"anyOf":[{"type":"string"},{"type":"integer"}]}`, `true`, "expected string or integer, got boolean"},
		{"anyOf one type fits", `{"anyOf":[{"type":"string","minLength":3},{"type":"integer"}]}`, `"ab"`, "must be at least 3 characters long"},
		{"anyOf closest branch", `{"anyOf":[{"type":"object","required":["a","b"]},{"type":"object","required":["c"]}]}`, `{}`, "c: is required"},
		{"oneOf none", `{"oneOf":[{"type":"string"},{"type":"null"}]}`, `1`, "expected string or null, got number"},
		{"oneOf two", `{"oneOf":[{"type":"number"},{"type":"integer"}]}`, `1`, "must match exactly one of the 2 schemas of oneOf, matches 2"},
		{"oneOf one", `{"oneOf":[{"type":"number"},{"type":"integer"}]}`, `1.5`, ""},
		{"not", `{"not":{"type":"string"}}`, `"x"`, "must not match the schema under not"},
		{"boolean schema false", `{"properties":{"a":false}}`, `{"a":1}`, "a: must not match the schema under not"},
		{"boolean schema true", `{"properties":{"a":true}}`, `{"a":1}`, ""},
		{"prefixItems", `{"prefixItems":[{"type":"string"},{"type":"integer"}],"items":{"type":"boolean"}}`, `["a",1,true,"x"]`, "[3]: expected boolean, got string"},
		{"draft 07 tuple items", `{"items":[{"type":"string"}],"additionalItems":{"type":"integer"}}`, `[1,"x"]`, "[0]: expected string, got number; [1]: expected integer, got string"},
		{"annotations ignored", `{"$schema":"http://json-schema.org/draft-07/schema#","title":"T","examples":[1],"readOnly":true,"x-vendor":{"a":1},"type":"object"}`, `{}`, ""},
		{"unchecked keyword accepted", `{"type":"array","uniqueItems":true}`, `[1,1]`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustParse(t, tt.schema)
			var v any
			require.NoError(t, json.Unmarshal([]byte(tt.value), &v))
			err := s.Validate(v)
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, jsonschema.ErrValidation)
			require.EqualError(t, err, tt.want)
		})
	}
}

func TestParseUnchecked(t *testing.T) {
	t.Parallel()
	s := mustParse(t, `{"type":"object","minProperties":1,"properties":{"n":{"type":"number","multipleOf":2},"l":{"uniqueItems":true,"items":{"if":{}}}}}`)
	require.Equal(t, []string{"if", "minProperties", "multipleOf", "uniqueItems"}, s.Unchecked)
	require.Empty(t, mustParse(t, `{"type":"object"}`).Unchecked)
}

func TestParseInvalid(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, doc, want string }{
		{"not JSON", `{"type":`, "#: not JSON"},
		{"not an object", `[1]`, "#: a schema is an object or a boolean, not [1]"},
		{"unknown type", `{"type":"float"}`, `#/type: invalid type: unknown type "float"`},
		{"type of the wrong kind", `{"type":1}`, "#/type: invalid type: not a type name or a list of them: 1"},
		{"bad pattern", `{"pattern":"("}`, "#: pattern"},
		{"negative minLength", `{"minLength":-1}`, "#/minLength: invalid minLength: not a non-negative integer: -1"},
		{"remote ref", `{"$ref":"https://example.com/s.json"}`, "only references inside the document"},
		{"ref to nothing", `{"$ref":"#/definitions/nope"}`, `$ref "#/definitions/nope" names no entry`},
		{"ref cycle through allOf", `{"$defs":{"a":{"allOf":[{"$ref":"#/$defs/b"}]},"b":{"anyOf":[{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`, "$ref cycle that never reaches a schema"},
		{"self ref", `{"$ref":"#"}`, "$ref cycle"},
		{"empty anyOf", `{"anyOf":[]}`, "anyOf is an empty list"},
		{"properties not an object", `{"properties":[]}`, "#/properties: invalid properties: not an object of schemas"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := jsonschema.Parse([]byte(tt.doc))
			require.ErrorIs(t, err, jsonschema.ErrInvalidSchema)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// TestParseKeepsOrderAndEncodes checks that a parsed schema keeps the
// document's property order and encodes what it checks.
func TestParseKeepsOrderAndEncodes(t *testing.T) {
	t.Parallel()
	s := mustParse(t, `{"type":"object","properties":{"z":{"type":["string","integer","null"]},"a":{"anyOf":[{"const":1},{"type":"string"}]},"m":{"not":{}}},"required":["z"],"title":"dropped"}`)
	require.Equal(t, "z", s.Properties[0].Name)
	require.JSONEq(t, `{"type":"object","properties":{"z":{"type":["string","integer","null"]},"a":{"anyOf":[{"enum":[1]},{"type":"string"}]},"m":{"not":{}}},"required":["z"]}`, string(s.JSON()))
	again := mustParse(t, string(s.JSON()))
	require.Equal(t, string(s.JSON()), string(again.JSON()))
}

// TestParseRealServers parses the tool schemas the npm MCP test servers
// publish (testdata/mcp, captured from their tools/list) and validates
// arguments against them.
func TestParseRealServers(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/mcp/*.json")
	require.NoError(t, err)
	require.Len(t, files, 2)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var tools map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(b, &tools))
		for name, doc := range tools {
			s, err := jsonschema.Parse(doc)
			require.NoError(t, err, name)
			require.Empty(t, s.Unchecked, name)
		}
	}
	fs := realSchemas(t, "testdata/mcp/server-filesystem.json")
	edit := mustParse(t, string(fs["fs__edit_file"]))
	require.NoError(t, edit.Validate(decodeArgs(t, `{"path":"a.txt","edits":[{"oldText":"a","newText":"b"}]}`)))
	require.EqualError(t, edit.Validate(decodeArgs(t, `{"path":1,"edits":[{"oldText":"a"}],"dryRun":"yes"}`)),
		"dryRun: expected boolean, got string; edits[0].newText: is required; path: expected string, got number")
}

func realSchemas(t testing.TB, file string) map[string]json.RawMessage {
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	var tools map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &tools))
	return tools
}

// FuzzParse parses arbitrary documents: Parse must never panic, return
// either a schema or an ErrInvalidSchema, and a parsed schema must
// validate a few values without panicking and re-parse from its encoding.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{}`, `true`, `false`, `[]`, `{"type":["string","null"]}`,
		`{"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`,
		`{"anyOf":[{"type":"object","required":["a"]},{"not":{}}],"oneOf":[{},{"type":"integer"}]}`,
		`{"items":[{"type":"string"}],"additionalItems":false,"prefixItems":[true]}`,
		`{"properties":{"a":{"$ref":"#/properties/b"},"b":{"$ref":"#/properties/a"}}}`,
		`{"properties":{"a":{"items":{"$ref":"#"}}},"allOf":[{"$ref":"#/properties/a"}]}`,
		`{"minimum":1,"exclusiveMinimum":true,"enum":[],"const":null,"pattern":"^a"}`,
	} {
		f.Add([]byte(seed))
	}
	values := []any{nil, true, 1.0, 1.5, "x", []any{1.0, "a", nil}, map[string]any{"a": []any{map[string]any{}}, "b": "c"}}
	f.Fuzz(func(t *testing.T, doc []byte) {
		s, err := jsonschema.Parse(doc)
		if err != nil {
			if !errors.Is(err, jsonschema.ErrInvalidSchema) {
				t.Fatalf("error does not match ErrInvalidSchema: %v", err)
			}
			return
		}
		if !slices.IsSorted(s.Unchecked) {
			t.Fatalf("Unchecked not sorted: %v", s.Unchecked)
		}
		for _, v := range values {
			if err := s.Validate(v); err != nil && !errors.Is(err, jsonschema.ErrValidation) {
				t.Fatalf("Validate(%v): %v", v, err)
			}
		}
		if enc := s.JSON(); enc != nil {
			if _, err := jsonschema.Parse(enc); err != nil {
				t.Fatalf("encoding %s does not parse: %v", enc, err)
			}
		}
	})
}
