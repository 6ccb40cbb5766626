package jsonschema_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop/jsonschema"
)

type item struct {
	Name string `json:"name"`
	Qty  int    `json:"qty,omitempty" jsonschema:"minimum=1"`
}

// all exercises every rule; every property is optional so that each case
// can set just one.
type all struct {
	I     int               `json:"i,omitempty" jsonschema:"minimum=1,maximum=10"`
	X     int               `json:"x,omitempty" jsonschema:"exclusiveMinimum=0,exclusiveMaximum=10"`
	F     float64           `json:"f,omitempty"`
	S     string            `json:"s,omitempty" jsonschema:"minLength=2,maxLength=4"`
	P     string            `json:"p,omitempty" jsonschema:"pattern=^a+$"`
	E     string            `json:"e,omitempty" jsonschema:"enum=red|green"`
	EN    int               `json:"en,omitempty" jsonschema:"enum=1|2"`
	EB    bool              `json:"eb,omitempty" jsonschema:"enum=true"`
	B     bool              `json:"b,omitempty"`
	T     time.Time         `json:"t,omitzero"`
	Mail  string            `json:"mail,omitempty" jsonschema:"format=email"`
	ID    string            `json:"id,omitempty" jsonschema:"format=uuid"`
	Other string            `json:"other,omitempty" jsonschema:"format=x-custom"`
	L     []string          `json:"l,omitempty" jsonschema:"minItems=1,maxItems=2"`
	Items []item            `json:"items,omitempty"`
	M     map[string]uint8  `json:"m,omitempty"`
	Ptr   *int              `json:"ptr,omitempty"`
	Any   any               `json:"any,omitempty"`
	Raw   json.RawMessage   `json:"raw,omitempty"`
	Tree  *Node             `json:"tree,omitempty"`
	Deep  map[string][]item `json:"deep,omitempty"`
}

type pair struct {
	A int    `json:"a"`
	B string `json:"b"`
}

func mustFor[T any](t *testing.T) *jsonschema.Schema {
	t.Helper()
	s, err := jsonschema.For[T]()
	require.NoError(t, err)
	return s
}

func decode(t *testing.T, data string) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(data), &v))
	return v
}

func TestValidate(t *testing.T) {
	t.Parallel()

	allSchema := mustFor[all](t)
	pairSchema := mustFor[pair](t)
	long := `{"items":[` + strings.Repeat(`{"name":1},`, 11) + `{"name":"ok"}]}`

	tests := []struct {
		name   string
		schema *jsonschema.Schema
		input  string
		want   string // "" when valid
	}{
		{"empty object", allSchema, `{}`, ""},
		{"not an object", allSchema, `[]`, "expected object, got array"},
		{"null root", allSchema, `null`, "expected object, got null"},
		{"brief example", pairSchema, `{"a":"x"}`, "a: expected integer, got string; b: is required"},
		{"pair valid", pairSchema, `{"a":1,"b":""}`, ""},
		{"unknown fields are admitted by default", pairSchema, `{"a":1,"b":"","c":true}`, ""},

		{"integer accepts 2.0", allSchema, `{"i":2.0}`, ""},
		{"integer accepts exponent", allSchema, `{"i":1e1}`, ""},
		{"integer rejects 1.5", allSchema, `{"i":1.5}`, "i: expected integer, got number"},
		{"integer rejects string", allSchema, `{"i":"1"}`, "i: expected integer, got string"},
		{"minimum", allSchema, `{"i":0}`, "i: must be >= 1"},
		{"maximum", allSchema, `{"i":11}`, "i: must be <= 10"},
		{"bounds inclusive", allSchema, `{"i":10}`, ""},
		{"exclusiveMinimum", allSchema, `{"x":0}`, "x: must be > 0"},
		{"exclusiveMaximum", allSchema, `{"x":10}`, "x: must be < 10"},
		{"exclusive inside", allSchema, `{"x":9}`, ""},
		{"number accepts fractions", allSchema, `{"f":-0.25}`, ""},
		{"number rejects bool", allSchema, `{"f":true}`, "f: expected number, got boolean"},

		{"string length in runes", allSchema, `{"s":"ééé"}`, ""},
		{"minLength", allSchema, `{"s":"é"}`, "s: must be at least 2 characters long"},
		{"maxLength", allSchema, `{"s":"ééééé"}`, "s: must be at most 4 characters long"},
		{"string rejects number", allSchema, `{"s":5}`, "s: expected string, got number"},
		{"pattern match", allSchema, `{"p":"aaa"}`, ""},
		{"pattern mismatch", allSchema, `{"p":"aab"}`, "p: must match pattern ^a+$"},
		{"enum string", allSchema, `{"e":"green"}`, ""},
		{"enum string mismatch", allSchema, `{"e":"blue"}`, `e: must be one of "red", "green"`},
		{"enum integer", allSchema, `{"en":2}`, ""},
		{"enum integer mismatch", allSchema, `{"en":3}`, "en: must be one of 1, 2"},
		{"enum boolean mismatch", allSchema, `{"eb":false}`, "eb: must be one of true"},
		{"boolean", allSchema, `{"b":false}`, ""},
		{"boolean rejects string", allSchema, `{"b":"true"}`, "b: expected boolean, got string"},

		{"date-time", allSchema, `{"t":"2024-05-01T10:00:00.5+02:00"}`, ""},
		{"date-time invalid", allSchema, `{"t":"2024-05-01"}`, "t: must be a valid date-time"},
		{"email", allSchema, `{"mail":"a@b.example"}`, ""},
		{"email with a name", allSchema, `{"mail":"A <a@b.example>"}`, "mail: must be a valid email"},
		{"uuid", allSchema, `{"id":"123e4567-e89b-12d3-a456-426614174000"}`, ""},
		{"uuid invalid", allSchema, `{"id":"123e4567e89b12d3a456426614174000"}`, "id: must be a valid uuid"},
		{"unknown format is an annotation", allSchema, `{"other":"anything"}`, ""},

		{"array", allSchema, `{"l":["a","b"]}`, ""},
		{"minItems", allSchema, `{"l":[]}`, "l: must have at least 1 item"},
		{"maxItems", allSchema, `{"l":["a","b","c"]}`, "l: must have at most 2 items"},
		{"array items", allSchema, `{"l":["a",1]}`, "l[1]: expected string, got number"},
		{"array rejects object", allSchema, `{"l":{}}`, "l: expected array, got object"},
		{"nested item paths", allSchema, `{"items":[{"name":"a"},{"name":"b","qty":0},{"qty":1.5}]}`,
			"items[1].qty: must be >= 1; items[2].name: is required; items[2].qty: expected integer, got number"},
		{"indexes sort numerically", allSchema, long, func() string {
			var parts []string
			for i := range 11 {
				parts = append(parts, fmt.Sprintf("items[%d].name: expected string, got number", i))
			}
			return strings.Join(parts, "; ")
		}()},

		{"map values", allSchema, `{"m":{"a":1,"b":255}}`, ""},
		{"map value issues", allSchema, `{"m":{"b":256,"a":-1,"a.b":"x","":0.5}}`,
			`m.a: must be >= 0; m.b: must be <= 255; m[""]: expected integer, got number; m["a.b"]: expected integer, got string`},
		{"deep map of arrays", allSchema, `{"deep":{"k":[{"name":"x"},{"name":false}]}}`, "deep.k[1].name: expected string, got boolean"},

		{"pointer admits null", allSchema, `{"ptr":null}`, ""},
		{"pointer admits its element", allSchema, `{"ptr":3}`, ""},
		{"pointer checks its element", allSchema, `{"ptr":"3"}`, "ptr: expected integer or null, got string"},
		{"non-pointer rejects null", allSchema, `{"i":null}`, "i: expected integer, got null"},
		{"any admits anything", allSchema, `{"any":[1,{"a":null}],"raw":"x"}`, ""},
		{"any admits null", allSchema, `{"any":null}`, ""},

		{"recursive valid", allSchema, `{"tree":{"value":1,"children":[{"value":2,"children":[null,{"value":3}]}]}}`, ""},
		{"recursive issues", allSchema, `{"tree":{"value":1,"children":[{"children":[{"value":"3"}]}]}}`,
			"tree.children[0].children[0].value: expected integer, got string; tree.children[0].value: is required"},

		{"collects every issue", allSchema, `{"i":0,"s":"","p":"b","l":[],"b":1}`,
			"b: expected boolean, got number; i: must be >= 1; l: must have at least 1 item; p: must match pattern ^a+$; s: must be at least 2 characters long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.schema.Validate(decode(t, tt.input))
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tt.want)
			require.ErrorIs(t, err, jsonschema.ErrValidation)
			var ve *jsonschema.ValidationError
			require.ErrorAs(t, err, &ve)
			require.NotEmpty(t, ve.Issues)
		})
	}
}

func TestValidateHandBuilt(t *testing.T) {
	t.Parallel()

	closed := &jsonschema.Schema{
		Type:                 jsonschema.TypeObject,
		Properties:           []jsonschema.Property{{Name: "a", Schema: &jsonschema.Schema{Type: jsonschema.TypeInteger}}},
		Required:             []string{"a"},
		AdditionalProperties: new(false),
	}
	// b is required but has no property schema: any value will do.
	extraRequired := &jsonschema.Schema{Type: jsonschema.TypeObject, Required: []string{"b"}}
	formats := &jsonschema.Schema{Properties: []jsonschema.Property{
		{Name: "u", Schema: &jsonschema.Schema{Format: "uri"}},
		{Name: "v4", Schema: &jsonschema.Schema{Format: "ipv4"}},
		{Name: "v6", Schema: &jsonschema.Schema{Format: "ipv6"}},
		{Name: "tm", Schema: &jsonschema.Schema{Format: "time"}},
		{Name: "d", Schema: &jsonschema.Schema{Format: "date"}},
	}}
	var many []jsonschema.Property
	for i := range 12 {
		many = append(many, jsonschema.Property{Name: fmt.Sprint("p", i), Schema: &jsonschema.Schema{Type: jsonschema.TypeInteger}})
	}

	tests := []struct {
		name   string
		schema *jsonschema.Schema
		value  any
		want   string
	}{
		{"unknown field", closed, map[string]any{"a": 1.0, "zz": 1.0, "c": 2.0}, "c: unknown field; zz: unknown field"},
		// Keys equal as numbers ("0", "00") still sort one way (found by FuzzValidate).
		{"unknown numeric keys in a total order", closed, map[string]any{"a": 1.0, "0000": 1.0, "00": 1.0, "000": 1.0, "0": 1.0, "1": 1.0, "01": 1.0},
			"0: unknown field; 00: unknown field; 000: unknown field; 0000: unknown field; 01: unknown field; 1: unknown field"},
		{"required without a property schema", extraRequired, map[string]any{"a": 1.0}, "b: is required"},
		{"required without a property schema present", extraRequired, map[string]any{"b": nil}, ""},
		{"json.Number integer", closed, map[string]any{"a": json.Number("2.0")}, ""},
		{"json.Number fraction", closed, map[string]any{"a": json.Number("2.5")}, "a: expected integer, got number"},
		{"json.Number out of range", closed, map[string]any{"a": json.Number("1e400")}, `a: invalid number "1e400"`},
		{"Go value that JSON does not decode to", closed, map[string]any{"a": 1}, "a: unsupported Go value of type int (not a decoded JSON value)"},
		{"zero schema admits anything", &jsonschema.Schema{}, []any{nil, "x", 1.0}, ""},
		{"keywords apply to their type only", &jsonschema.Schema{MinLength: new(3), Minimum: new(5.0)}, "abc", ""},
		{"keywords without a type fail", &jsonschema.Schema{Items: &jsonschema.Schema{MinLength: new(3), Minimum: new(5.0)}}, []any{"ab", 1.0},
			"[0]: must be at least 3 characters long; [1]: must be >= 5"},
		{"enum admits null when listed", &jsonschema.Schema{Enum: []any{"a", nil}}, nil, ""},
		{"enum without null", &jsonschema.Schema{Enum: []any{"a", 1}}, nil, `must be one of "a", 1`},
		{"enum of Go ints matches decoded floats", &jsonschema.Schema{Enum: []any{1, int64(2)}}, 2.0, ""},
		{"enum of objects", &jsonschema.Schema{Enum: []any{map[string]int{"a": 1}}}, map[string]any{"a": 1.0}, ""},
		{"enum of arrays mismatch", &jsonschema.Schema{Enum: []any{[]int{1}}}, []any{2.0}, "must be one of [1]"},
		{"nullable enum admits null", &jsonschema.Schema{Type: jsonschema.TypeString, Nullable: true, Enum: []any{"a"}}, nil, ""},
		{"number type admits integers", &jsonschema.Schema{Type: jsonschema.TypeNumber}, 3.0, ""},
		{"null type", &jsonschema.Schema{Type: jsonschema.TypeNull}, 1.0, "expected null, got number"},
		{"root $defs ref", &jsonschema.Schema{
			Ref:  "#/$defs/pos",
			Defs: map[string]*jsonschema.Schema{"pos": {Type: jsonschema.TypeInteger, Minimum: new(1.0)}},
		}, 0.0, "must be >= 1"},
		{"ref plus own keywords, escaped name", &jsonschema.Schema{
			Type:  jsonschema.TypeArray,
			Items: &jsonschema.Schema{Ref: "#/$defs/a~1b", Maximum: new(3.0)},
			Defs:  map[string]*jsonschema.Schema{"a/b": {Type: jsonschema.TypeInteger, Minimum: new(1.0)}},
		}, []any{0.0, 4.0, 2.0}, "[0]: must be >= 1; [1]: must be <= 3"},
		{"formats fail", formats, map[string]any{"u": "relative/path", "v4": "::1", "v6": "1.2.3.4", "tm": "25:00:00Z", "d": "2024-02-30"},
			"d: must be a valid date; tm: must be a valid time; u: must be a valid uri; v4: must be a valid ipv4; v6: must be a valid ipv6"},
		{"formats pass", formats, map[string]any{"u": "https://example.com/x", "v4": "10.0.0.1", "v6": "fe80::1", "tm": "10:00:00.5+01:00", "d": "2024-02-29"}, ""},
		{"duplicate property names: the first wins", &jsonschema.Schema{
			Properties: []jsonschema.Property{
				{Name: "a", Schema: &jsonschema.Schema{Type: jsonschema.TypeInteger}},
				{Name: "a", Schema: &jsonschema.Schema{Type: jsonschema.TypeString}},
			},
			AdditionalProperties: new(false),
		}, map[string]any{"a": 1.0, "zz": 1.0}, "zz: unknown field"},
		{"many properties use an index", &jsonschema.Schema{Properties: many, AdditionalProperties: new(false)},
			map[string]any{"p0": 1.0, "p11": "x", "p12": 1.0}, "p11: expected integer, got string; p12: unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.schema.Validate(tt.value)
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tt.want)
		})
	}
}

func TestValidateInvalidSchema(t *testing.T) {
	t.Parallel()

	loop := &jsonschema.Schema{Ref: "#/$defs/a", Defs: map[string]*jsonschema.Schema{
		"a": {Ref: "#/$defs/b"},
		"b": {Ref: "#/$defs/a"},
	}}
	tests := []struct {
		name   string
		schema *jsonschema.Schema
		want   string
	}{
		{"unknown type", &jsonschema.Schema{Items: &jsonschema.Schema{Type: "int"}}, `jsonschema: invalid schema: #/items: unknown type "int"`},
		{"bad pattern", &jsonschema.Schema{Properties: []jsonschema.Property{{Name: "a", Schema: &jsonschema.Schema{Pattern: "("}}}},
			"jsonschema: invalid schema: #/properties/a: pattern: error parsing regexp: missing closing ): `(`"},
		{"negative length", &jsonschema.Schema{MaxLength: new(-1)}, "jsonschema: invalid schema: #: maxLength: maxLength is negative: -1"},
		{"negative items", &jsonschema.Schema{MinItems: new(-1)}, "jsonschema: invalid schema: #: minItems: minItems is negative: -1"},
		{"missing def", &jsonschema.Schema{Ref: "#/$defs/nope"}, `jsonschema: invalid schema: #: $ref "#/$defs/nope" names no entry of the root's $defs`},
		{"foreign ref", &jsonschema.Schema{Ref: "https://example.com/s.json"}, `jsonschema: invalid schema: #: unsupported $ref "https://example.com/s.json": only references inside the document (starting with #) are resolved`},
		{"ref cycle", loop, "$ref cycle that never reaches a schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.schema.Validate(1.0)
			require.ErrorIs(t, err, jsonschema.ErrInvalidSchema)
			require.False(t, errors.Is(err, jsonschema.ErrValidation))
			require.ErrorContains(t, err, tt.want)
			require.ErrorIs(t, tt.schema.Validate(1.0), jsonschema.ErrInvalidSchema, "the error is cached")
		})
	}
}

func TestValidateJSON(t *testing.T) {
	t.Parallel()

	s := mustFor[pair](t)
	require.NoError(t, s.ValidateJSON([]byte(`{"a":1,"b":"x"}`)))
	require.EqualError(t, s.ValidateJSON([]byte(`{"a":1}`)), "b: is required")
	err := s.ValidateJSON([]byte(`{"a":`))
	require.ErrorIs(t, err, jsonschema.ErrInvalidJSON)
	var syntax *json.SyntaxError
	require.ErrorAs(t, err, &syntax)
}

func TestValidationError(t *testing.T) {
	t.Parallel()

	t.Run("root issue has no path prefix", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "expected object, got null", jsonschema.Issue{Reason: "expected object, got null"}.String())
	})
	t.Run("empty", func(t *testing.T) {
		t.Parallel()
		require.EqualError(t, &jsonschema.ValidationError{}, "jsonschema: validation failed")
	})
	t.Run("wrapped", func(t *testing.T) {
		t.Parallel()
		err := fmt.Errorf("tool x: %w", mustFor[pair](t).Validate(map[string]any{}))
		require.ErrorIs(t, err, jsonschema.ErrValidation)
		var ve *jsonschema.ValidationError
		require.ErrorAs(t, err, &ve)
		require.Equal(t, []jsonschema.Issue{{Path: "a", Reason: "is required"}, {Path: "b", Reason: "is required"}}, ve.Issues)
	})
}

// TestValidateConcurrentFirstUse races the lazy compilation of a hand-built
// schema (run with -race).
func TestValidateConcurrentFirstUse(t *testing.T) {
	t.Parallel()

	s := &jsonschema.Schema{Type: jsonschema.TypeArray, Items: &jsonschema.Schema{Type: jsonschema.TypeString, Pattern: "^a"}}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			errs[i] = s.Validate([]any{"ab", "b"})
			_ = s.JSON()
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.EqualError(t, err, "[1]: must match pattern ^a")
	}
}
