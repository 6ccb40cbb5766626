package jsonschema_test

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop/jsonschema"
)

type scalars struct {
	S   string  `json:"s"`
	I   int     `json:"i"`
	I64 int64   `json:"i64"`
	F   float64 `json:"f"`
	F32 float32 `json:"f32"`
	B   bool    `json:"b"`
	Raw string  // no tag: the Go name
}

type requiredness struct {
	Plain    string  `json:"plain"`
	Omit     string  `json:"omit,omitempty"`
	Zero     string  `json:"zero,omitzero"`
	Ptr      *string `json:"ptr"`
	Forced   *int    `json:"forced" jsonschema:"required"`
	Optional int     `json:"optional" jsonschema:"optional"`
	Null     string  `json:"null" jsonschema:"nullable"`
}

type sizedInts struct {
	I8  int8    `json:"i8"`
	I16 int16   `json:"i16"`
	I32 int32   `json:"i32"`
	U   uint    `json:"u"`
	U8  uint8   `json:"u8"`
	U16 uint16  `json:"u16"`
	U32 uint32  `json:"u32"`
	U64 uint64  `json:"u64"`
	UP  uintptr `json:"up"`
}

type collections struct {
	List  []string           `json:"list"`
	Fixed [2]int             `json:"fixed"`
	Bytes []byte             `json:"bytes"`
	Map   map[string]bool    `json:"map"`
	IntM  map[int]string     `json:"int_m"`
	TextM map[netip.Addr]int `json:"text_m"`
	Ptrs  []*int             `json:"ptrs"`
	Grid  [][]float64        `json:"grid"`
}

type specials struct {
	At    time.Time       `json:"at"`
	Maybe *time.Time      `json:"maybe"`
	Raw   json.RawMessage `json:"raw"`
	Any   any             `json:"any"`
	Addr  netip.Addr      `json:"addr"`
	Money money           `json:"money"`
	Dur   time.Duration   `json:"dur"`
}

// money describes itself.
type money struct{ cents int64 }

func (money) JSONSchema() *jsonschema.Schema {
	return &jsonschema.Schema{Type: jsonschema.TypeString, Pattern: `^\d+\.\d\d$`}
}

type constraints struct {
	Name  string         `json:"name" desc:"who <you> are" jsonschema:"minLength=1,maxLength=20,pattern=^[a-z]+$"`
	Age   int            `json:"age" jsonschema:"minimum=0,maximum=150,default=30"`
	Score float64        `json:"score" jsonschema:"exclusiveMinimum=0,exclusiveMaximum=1.5"`
	Color string         `json:"color" jsonschema:"enum=red|green|blue"`
	Level int            `json:"level" jsonschema:"enum=1|2|3"`
	Flag  bool           `json:"flag" jsonschema:"enum=true,default=true"`
	When  string         `json:"when" jsonschema:"format=date-time"`
	Tags  []string       `json:"tags" jsonschema:"minItems=1,maxItems=3,pattern=^\\w+$,enum=a|b\\|c"`
	Comma string         `json:"comma" jsonschema:"pattern=^a\\,b$,default=x\\,y"`
	Prios map[string]int `json:"prios" jsonschema:"minimum=1"`
	Max8  uint8          `json:"max8" jsonschema:"maximum=200"`
	List  []int          `json:"list" jsonschema:"default=[1\\,2]"`
}

type Base struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

type Extra struct {
	Note string `json:"note"`
}

type Other struct {
	Name string
}

type embedding struct {
	Base
	*Extra
	Name   string `json:"name"` // shallower: wins over Base.Name
	Nested Base   `json:"nested"`
	Tagged Other  `json:"tagged"`
}

type ambiguous struct {
	A
	B
}

type A struct {
	X string
	Z string `json:"Z"`
}

type B struct {
	X string // as deep and as untagged as A.X: both dropped
	Z string // untagged: the tagged A.Z wins
	W string
}

type skipped struct {
	Keep    string `json:"keep"`
	Skip    string `json:"-"`
	Dash    string `json:"-,"`
	private string
	Bad     string `json:"a b!"` // valid tag characters
	Invalid string `json:"\\"`   // invalid name: the Go name
}

type quoted struct {
	N  int     `json:"n,string"`
	P  *int    `json:"p,string"`
	F  float64 `json:"f,string,omitempty"`
	Ss []int   `json:"ss,string"` // not a scalar: option ignored
}

type Node struct {
	Value    int     `json:"value"`
	Children []*Node `json:"children,omitempty"`
}

type Tree struct {
	Root  Node  `json:"root"`
	Other *Node `json:"other"`
}

type Even struct {
	Next *Odd `json:"next"`
}

type Odd struct {
	Next *Even `json:"next"`
}

type List[T any] struct {
	Head T        `json:"head"`
	Tail *List[T] `json:"tail"`
}

type wrapsGeneric struct {
	L List[int] `json:"l"`
}

type nested struct {
	Inner struct {
		A int `json:"a"`
	} `json:"inner"`
	Items []Base `json:"items"`
}

type empty struct{}

func TestDerive(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name   string
		derive func() (*jsonschema.Schema, error)
		want   string
	}{
		{
			name:   "scalars",
			derive: jsonschema.For[scalars],
			want:   `{"type":"object","properties":{"s":{"type":"string"},"i":{"type":"integer"},"i64":{"type":"integer"},"f":{"type":"number"},"f32":{"type":"number"},"b":{"type":"boolean"},"Raw":{"type":"string"}},"required":["s","i","i64","f","f32","b","Raw"]}`,
		},
		{
			name:   "required unless omitempty, omitzero, pointer or overridden",
			derive: jsonschema.For[requiredness],
			want:   `{"type":"object","properties":{"plain":{"type":"string"},"omit":{"type":"string"},"zero":{"type":"string"},"ptr":{"type":["string","null"]},"forced":{"type":["integer","null"]},"optional":{"type":"integer"},"null":{"type":["string","null"]}},"required":["plain","forced","null"]}`,
		},
		{
			name:   "sized integers carry their range",
			derive: jsonschema.For[sizedInts],
			want:   `{"type":"object","properties":{"i8":{"type":"integer","minimum":-128,"maximum":127},"i16":{"type":"integer","minimum":-32768,"maximum":32767},"i32":{"type":"integer","minimum":-2147483648,"maximum":2147483647},"u":{"type":"integer","minimum":0},"u8":{"type":"integer","minimum":0,"maximum":255},"u16":{"type":"integer","minimum":0,"maximum":65535},"u32":{"type":"integer","minimum":0,"maximum":4294967295},"u64":{"type":"integer","minimum":0},"up":{"type":"integer","minimum":0}},"required":["i8","i16","i32","u","u8","u16","u32","u64","up"]}`,
		},
		{
			name:   "collections",
			derive: jsonschema.For[collections],
			want:   `{"type":"object","properties":{"list":{"type":"array","items":{"type":"string"}},"fixed":{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":2},"bytes":{"type":"string","contentEncoding":"base64"},"map":{"type":"object","additionalProperties":{"type":"boolean"}},"int_m":{"type":"object","additionalProperties":{"type":"string"}},"text_m":{"type":"object","additionalProperties":{"type":"integer"}},"ptrs":{"type":"array","items":{"type":["integer","null"]}},"grid":{"type":"array","items":{"type":"array","items":{"type":"number"}}}},"required":["list","fixed","bytes","map","int_m","text_m","ptrs","grid"]}`,
		},
		{
			name:   "special types",
			derive: jsonschema.For[specials],
			want:   `{"type":"object","properties":{"at":{"type":"string","format":"date-time"},"maybe":{"type":["string","null"],"format":"date-time"},"raw":{},"any":{},"addr":{"type":"string"},"money":{"type":"string","pattern":"^\\d+\\.\\d\\d$"},"dur":{"type":"integer"}},"required":["at","raw","any","addr","money","dur"]}`,
		},
		{
			name:   "desc and jsonschema tags",
			derive: jsonschema.For[constraints],
			want:   `{"type":"object","properties":{"name":{"type":"string","description":"who <you> are","pattern":"^[a-z]+$","minLength":1,"maxLength":20},"age":{"type":"integer","default":30,"minimum":0,"maximum":150},"score":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1.5},"color":{"type":"string","enum":["red","green","blue"]},"level":{"type":"integer","enum":[1,2,3]},"flag":{"type":"boolean","enum":[true],"default":true},"when":{"type":"string","format":"date-time"},"tags":{"type":"array","items":{"type":"string","enum":["a","b|c"],"pattern":"^\\w+$"},"minItems":1,"maxItems":3},"comma":{"type":"string","default":"x,y","pattern":"^a,b$"},"prios":{"type":"object","additionalProperties":{"type":"integer","minimum":1}},"max8":{"type":"integer","minimum":0,"maximum":200},"list":{"type":"array","default":[1,2],"items":{"type":"integer"}}},"required":["name","age","score","color","level","flag","when","tags","comma","prios","max8","list"]}`,
		},
		{
			name:   "embedded structs flatten like encoding/json",
			derive: jsonschema.For[embedding],
			want:   `{"type":"object","properties":{"id":{"type":"string"},"note":{"type":"string"},"name":{"type":"string"},"nested":{"type":"object","properties":{"id":{"type":"string"},"name":{"type":"string"}},"required":["id","name"]},"tagged":{"type":"object","properties":{"Name":{"type":"string"}},"required":["Name"]}},"required":["id","name","nested","tagged"]}`,
		},
		{
			name:   "ambiguous embedded names are dropped",
			derive: jsonschema.For[ambiguous],
			want:   `{"type":"object","properties":{"Z":{"type":"string"},"W":{"type":"string"}},"required":["Z","W"]}`,
		},
		{
			name:   "skipped and renamed fields",
			derive: jsonschema.For[skipped],
			want:   `{"type":"object","properties":{"keep":{"type":"string"},"-":{"type":"string"},"a b!":{"type":"string"},"Invalid":{"type":"string"}},"required":["keep","-","a b!","Invalid"]}`,
		},
		{
			name:   "string option",
			derive: jsonschema.For[quoted],
			want:   `{"type":"object","properties":{"n":{"type":"string"},"p":{"type":["string","null"]},"f":{"type":"string"},"ss":{"type":"array","items":{"type":"integer"}}},"required":["n","ss"]}`,
		},
		{
			name:   "recursive root refers to #",
			derive: jsonschema.For[Node],
			want:   `{"type":"object","properties":{"value":{"type":"integer"},"children":{"type":"array","items":{"anyOf":[{"$ref":"#"},{"type":"null"}]}}},"required":["value"]}`,
		},
		{
			name:   "recursive field goes to $defs",
			derive: jsonschema.For[Tree],
			want:   `{"type":"object","properties":{"root":{"$ref":"#/$defs/Node"},"other":{"anyOf":[{"$ref":"#/$defs/Node"},{"type":"null"}]}},"required":["root"],"$defs":{"Node":{"type":"object","properties":{"value":{"type":"integer"},"children":{"type":"array","items":{"anyOf":[{"$ref":"#/$defs/Node"},{"type":"null"}]}}},"required":["value"]}}}`,
		},
		{
			name:   "mutual recursion",
			derive: jsonschema.For[Even],
			want:   `{"type":"object","properties":{"next":{"type":["object","null"],"properties":{"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}}}}}`,
		},
		{
			name:   "generic recursive type name is sanitised",
			derive: jsonschema.For[wrapsGeneric],
			want:   `{"type":"object","properties":{"l":{"$ref":"#/$defs/List_int_"}},"required":["l"],"$defs":{"List_int_":{"type":"object","properties":{"head":{"type":"integer"},"tail":{"anyOf":[{"$ref":"#/$defs/List_int_"},{"type":"null"}]}},"required":["head"]}}}`,
		},
		{
			name:   "nested structs inline",
			derive: jsonschema.For[nested],
			want:   `{"type":"object","properties":{"inner":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},"items":{"type":"array","items":{"type":"object","properties":{"id":{"type":"string"},"name":{"type":"string"}},"required":["id","name"]}}},"required":["inner","items"]}`,
		},
		{
			name:   "empty struct",
			derive: jsonschema.For[empty],
			want:   `{"type":"object","properties":{}}`,
		},
		{
			name:   "pointer root is its element, not nullable",
			derive: jsonschema.For[*empty],
			want:   `{"type":"object","properties":{}}`,
		},
		{
			name:   "slice root",
			derive: jsonschema.For[[]int],
			want:   `{"type":"array","items":{"type":"integer"}}`,
		},
		{
			name:   "map root",
			derive: jsonschema.For[map[string]string],
			want:   `{"type":"object","additionalProperties":{"type":"string"}}`,
		},
		{
			name:   "scalar root",
			derive: jsonschema.For[string],
			want:   `{"type":"string"}`,
		},
		{
			name:   "interface root",
			derive: jsonschema.For[any],
			want:   `{}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := tt.derive()
			require.NoError(t, err)
			require.Equal(t, tt.want, string(s.JSON()), "byte-exact, in Go field order")
			require.True(t, json.Valid(s.JSON()))
		})
	}
}

func TestDeriveDefNameCollision(t *testing.T) {
	t.Parallel()

	// A second type named Node, declared here.
	type Node struct {
		Kids []Node `json:"kids"`
	}
	type both struct {
		A Node    `json:"a"`
		B pkgNode `json:"b"`
	}
	s, err := jsonschema.For[both]()
	require.NoError(t, err)
	require.Equal(t, `{"type":"object","properties":{"a":{"$ref":"#/$defs/Node"},"b":{"$ref":"#/$defs/Node2"}},"required":["a","b"],"$defs":{"Node":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/Node"}}},"required":["kids"]},"Node2":{"type":"object","properties":{"value":{"type":"integer"},"children":{"type":"array","items":{"anyOf":[{"$ref":"#/$defs/Node2"},{"type":"null"}]}}},"required":["value"]}}}`, string(s.JSON()))
}

// pkgNode is the package-level Node under another name.
type pkgNode = Node

type hasFunc struct {
	Name    string `json:"name"`
	Handler func() `json:"handler"`
}

type deepChan struct {
	Items []struct {
		Events chan int `json:"events"`
	} `json:"items"`
}

type selfPtr *selfPtr

type badTags struct {
	Field string `json:"field" jsonschema:"minimum=1"`
}

type tagCase[T any] struct {
	Field T `json:"field"`
}

func TestDeriveErrors(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		typ     reflect.Type
		is      error
		message string
	}{
		{"func field", reflect.TypeFor[hasFunc](), jsonschema.ErrUnsupportedType,
			"jsonschema: unsupported type: handler (field hasFunc.Handler) of type func(): func has no JSON form"},
		{"nested chan names the path", reflect.TypeFor[deepChan](), jsonschema.ErrUnsupportedType,
			"jsonschema: unsupported type: items[].events (field Events) of type chan int: chan has no JSON form"},
		{"complex root", reflect.TypeFor[complex128](), jsonschema.ErrUnsupportedType,
			"jsonschema: unsupported type: root type of type complex128: complex128 has no JSON form"},
		{"struct map keys", reflect.TypeFor[map[Base]int](), jsonschema.ErrUnsupportedType,
			"jsonschema: unsupported type: root type of type map[jsonschema_test.Base]int: map keys must be strings, integers or encoding.TextUnmarshaler"},
		{"self pointer", reflect.TypeFor[tagCase[selfPtr]](), jsonschema.ErrUnsupportedType,
			"jsonschema: unsupported type: field (field tagCase[github.com/lovia-fleet/lovia/pkg/loop/jsonschema_test.selfPtr].Field) of type jsonschema_test.selfPtr: pointer type that points to itself"},
		{"nil type", nil, jsonschema.ErrUnsupportedType,
			"jsonschema: unsupported type: root type: nil type (an interface value with no type)"},
		{"minimum on a string", reflect.TypeFor[badTags](), jsonschema.ErrInvalidTag,
			"jsonschema: invalid struct tag: field (field badTags.Field) of type string: minimum applies to numbers only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := jsonschema.Reflect(tt.typ)
			require.Nil(t, s)
			require.ErrorIs(t, err, tt.is)
			require.EqualError(t, err, tt.message)
			var de *jsonschema.DeriveError
			require.ErrorAs(t, err, &de)
		})
	}
}

func TestDeriveTagErrors(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name   string
		derive func() (*jsonschema.Schema, error)
		detail string
	}{
		{"unknown key", jsonschema.For[struct {
			F string `json:"f" jsonschema:"minimun=1"`
		}], `unknown key "minimun"`},
		{"missing value", jsonschema.For[struct {
			F string `json:"f" jsonschema:"pattern"`
		}], "pattern needs a value: pattern=..."},
		{"flag with value", jsonschema.For[struct {
			F string `json:"f" jsonschema:"required=true"`
		}], "required takes no value"},
		{"duplicate key", jsonschema.For[struct {
			F string `json:"f" jsonschema:"minLength=1,minLength=2"`
		}], `duplicate key "minLength"`},
		{"minLength on an int", jsonschema.For[struct {
			F int `json:"f" jsonschema:"minLength=1"`
		}], "minLength applies to strings only"},
		{"length not a number", jsonschema.For[struct {
			F string `json:"f" jsonschema:"maxLength=x"`
		}], `maxLength value "x": strconv.Atoi: parsing "x": invalid syntax`},
		{"negative length", jsonschema.For[struct {
			F string `json:"f" jsonschema:"minLength=-1"`
		}], `minLength value "-1": must not be negative`},
		{"bad pattern", jsonschema.For[struct {
			F string `json:"f" jsonschema:"pattern=a(b"`
		}], "pattern does not compile: error parsing regexp: missing closing ): `a(b`"},
		{"format on a bool", jsonschema.For[struct {
			F bool `json:"f" jsonschema:"format=date"`
		}], "format applies to strings only"},
		{"enum on a struct", jsonschema.For[struct {
			F Base `json:"f" jsonschema:"enum=a"`
		}], "enum applies to strings, numbers and booleans only"},
		{"enum value not an integer", jsonschema.For[struct {
			F int `json:"f" jsonschema:"enum=1|x"`
		}], `enum value "x": strconv.ParseInt: parsing "x": invalid syntax`},
		{"minItems on a string", jsonschema.For[struct {
			F string `json:"f" jsonschema:"minItems=1"`
		}], "minItems applies to slices and arrays only"},
		{"maximum overflows uint8", jsonschema.For[struct {
			F uint8 `json:"f" jsonschema:"maximum=300"`
		}], `maximum value "300": strconv.ParseUint: parsing "300": value out of range`},
		{"fractional minimum on an int", jsonschema.For[struct {
			F int `json:"f" jsonschema:"minimum=1.5"`
		}], `minimum value "1.5": strconv.ParseInt: parsing "1.5": invalid syntax`},
		{"bad default", jsonschema.For[struct {
			F bool `json:"f" jsonschema:"default=yes"`
		}], `default value "yes": strconv.ParseBool: parsing "yes": invalid syntax`},
		{"bad JSON default", jsonschema.For[struct {
			F []int `json:"f" jsonschema:"default=[1"`
		}], `default value "[1": unexpected end of JSON input`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := tt.derive()
			require.ErrorIs(t, err, jsonschema.ErrInvalidTag)
			var de *jsonschema.DeriveError
			require.ErrorAs(t, err, &de)
			require.Equal(t, "f", de.Path)
			require.Equal(t, "F", de.Field)
			require.ErrorContains(t, err, "jsonschema: invalid struct tag: f (field F) of type ")
			require.ErrorContains(t, err, tt.detail)
		})
	}
}

func TestDeriveSchemaProviderIsCopied(t *testing.T) {
	t.Parallel()

	type withMoney struct {
		A money `json:"a" desc:"first"`
		B money `json:"b"`
	}
	s, err := jsonschema.For[withMoney]()
	require.NoError(t, err)
	require.Equal(t, "first", s.Property("a").Description)
	require.Empty(t, s.Property("b").Description, "tags on one field must not leak into another")
	require.Empty(t, money{}.JSONSchema().Description)
}

func TestDeriveIsDeterministic(t *testing.T) {
	t.Parallel()

	first, err := jsonschema.For[Tree]()
	require.NoError(t, err)
	for range 20 {
		again, err := jsonschema.For[Tree]()
		require.NoError(t, err)
		require.Equal(t, string(first.JSON()), string(again.JSON()))
	}
}

// TestDerivePropertiesMatchEncodingJSON checks the derived property names,
// in order, against the keys encoding/json writes for the same type.
func TestDerivePropertiesMatchEncodingJSON(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name   string
		value  any
		derive func() (*jsonschema.Schema, error)
	}{
		{"scalars", scalars{}, jsonschema.For[scalars]},
		{"embedding", embedding{Extra: &Extra{}}, jsonschema.For[embedding]},
		{"ambiguous", ambiguous{}, jsonschema.For[ambiguous]},
		{"skipped", skipped{}, jsonschema.For[skipped]},
		{"specials", specials{}, jsonschema.For[specials]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := tt.derive()
			require.NoError(t, err)
			var names []string
			for _, p := range s.Properties {
				names = append(names, p.Name)
			}
			enc, err := json.Marshal(tt.value)
			require.NoError(t, err)
			require.Equal(t, topLevelKeys(t, enc), names)
		})
	}
}

func topLevelKeys(t *testing.T, data []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	require.NoError(t, err)
	require.Equal(t, json.Delim('{'), tok)
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		require.NoError(t, err)
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		require.NoError(t, dec.Decode(&skip))
	}
	return keys
}
