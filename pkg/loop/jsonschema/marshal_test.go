package jsonschema_test

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop/jsonschema"
)

func TestMarshal(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name   string
		schema *jsonschema.Schema
		want   string
	}{
		{"zero", &jsonschema.Schema{}, `{}`},
		{"string escaping", &jsonschema.Schema{Description: "q\"b\\n\n\r\t\x01<>&\u2028é\xff"},
			`{"description":"q\"b\\n\n\r\t\u0001<>&\u2028é\ufffd"}`},
		{"numbers like encoding/json", &jsonschema.Schema{Minimum: new(1e21), Maximum: new(1e-7), ExclusiveMinimum: new(-0.5), ExclusiveMaximum: new(100.0)},
			`{"minimum":1e+21,"exclusiveMinimum":-0.5,"maximum":1e-7,"exclusiveMaximum":100}`},
		{"nullable type", &jsonschema.Schema{Type: jsonschema.TypeInteger, Nullable: true}, `{"type":["integer","null"]}`},
		{"nullable null", &jsonschema.Schema{Type: jsonschema.TypeNull, Nullable: true}, `{"type":"null"}`},
		{"nullable any is any", &jsonschema.Schema{Nullable: true}, `{}`},
		{"nullable ref", &jsonschema.Schema{Ref: "#", Nullable: true, Description: "d"}, `{"anyOf":[{"$ref":"#"},{"type":"null"}],"description":"d"}`},
		{"nullable enum lists null", &jsonschema.Schema{Type: jsonschema.TypeString, Nullable: true, Enum: []any{"a"}},
			`{"type":["string","null"],"enum":["a",null]}`},
		{"nullable enum with null", &jsonschema.Schema{Type: jsonschema.TypeString, Nullable: true, Enum: []any{nil, "a"}},
			`{"type":["string","null"],"enum":[null,"a"]}`},
		{"enum values", &jsonschema.Schema{Enum: []any{"x", 1, int64(2), 2.5, true, nil, json.Number("7"), []int{1}}},
			`{"enum":["x",1,2,2.5,true,null,7,[1]]}`},
		{"additionalProperties true", &jsonschema.Schema{Type: jsonschema.TypeObject, AdditionalProperties: new(true)},
			`{"type":"object","additionalProperties":true}`},
		{"false wins over values", &jsonschema.Schema{AdditionalProperties: new(false), Values: &jsonschema.Schema{}},
			`{"additionalProperties":false}`},
		{"values", &jsonschema.Schema{AdditionalProperties: new(true), Values: &jsonschema.Schema{Type: jsonschema.TypeString}},
			`{"additionalProperties":{"type":"string"}}`},
		{"nil property schema", &jsonschema.Schema{Properties: []jsonschema.Property{{Name: "a"}}}, `{"properties":{"a":{}}}`},
		{"defs sorted", &jsonschema.Schema{Ref: "#/$defs/b", Defs: map[string]*jsonschema.Schema{
			"b": {Type: jsonschema.TypeString}, "a": {Type: jsonschema.TypeInteger}, "c": nil,
		}}, `{"$ref":"#/$defs/b","$defs":{"a":{"type":"integer"},"b":{"type":"string"},"c":{}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.schema.MarshalJSON()
			require.NoError(t, err)
			require.Equal(t, tt.want, string(got))
			require.Equal(t, tt.want, string(tt.schema.JSON()))
			require.Equal(t, tt.want, tt.schema.String())
			require.True(t, json.Valid(got))
		})
	}
}

func TestMarshalErrors(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name   string
		schema *jsonschema.Schema
		want   string
	}{
		{"NaN bound", &jsonschema.Schema{Minimum: new(math.NaN())}, "jsonschema: NaN has no JSON form"},
		{"Inf enum", &jsonschema.Schema{Enum: []any{math.Inf(1)}}, "jsonschema: +Inf has no JSON form"},
		{"channel default", &jsonschema.Schema{Default: make(chan int)}, "json: unsupported type: chan int"},
		{"bad json.Number", &jsonschema.Schema{Default: json.Number("x")}, `jsonschema: invalid json.Number "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := tt.schema.MarshalJSON()
			require.EqualError(t, err, tt.want)
			require.Nil(t, tt.schema.JSON())
		})
	}
}

func TestMarshalInsideJSON(t *testing.T) {
	t.Parallel()

	s := mustFor[pair](t)
	out, err := json.Marshal(struct {
		Name   string             `json:"name"`
		Params *jsonschema.Schema `json:"params"`
	}{"t", s})
	require.NoError(t, err)
	require.Equal(t, `{"name":"t","params":{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["a","b"]}}`, string(out))

	b, err := s.MarshalJSON()
	require.NoError(t, err)
	b[0] = 'x'
	require.Equal(t, byte('{'), s.JSON()[0], "MarshalJSON returns a copy")
}

func TestClone(t *testing.T) {
	t.Parallel()

	orig := mustFor[Tree](t)
	before := string(orig.JSON())
	c := orig.Clone()
	require.Equal(t, before, string(c.JSON()))

	c.Properties[0].Name = "changed"
	c.Required[0] = "changed"
	c.Defs["Node"].Properties[0].Schema.Type = jsonschema.TypeString
	*c.Defs["Node"].Properties[1].Schema.Items = jsonschema.Schema{}
	require.Equal(t, before, string(orig.JSON()))
	require.Equal(t, before, string(orig.Clone().JSON()))
	require.Nil(t, (*jsonschema.Schema)(nil).Clone())
}

func TestAccessors(t *testing.T) {
	t.Parallel()

	s := mustFor[requiredness](t)
	require.Equal(t, jsonschema.TypeString, s.Property("plain").Type)
	require.Nil(t, s.Property("missing"))
	require.True(t, s.IsRequired("plain"))
	require.False(t, s.IsRequired("ptr"))
}
