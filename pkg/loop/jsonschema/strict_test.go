package jsonschema_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

type strictIn struct {
	Query string            `json:"query"`
	Limit int               `json:"limit,omitempty"`
	Tags  []string          `json:"tags,omitempty"`
	Sort  string            `json:"sort,omitempty" jsonschema:"enum=asc|desc"`
	Any   any               `json:"any,omitempty"`
	Opts  *strictOpts       `json:"opts,omitempty"`
	Meta  map[string]string `json:"meta,omitempty"`
	Tree  *Node             `json:"tree,omitempty"`
}

type strictOpts struct {
	Deep bool `json:"deep,omitempty"`
}

func TestStrict(t *testing.T) {
	t.Parallel()

	orig := mustFor[strictIn](t)
	before := string(orig.JSON())
	s := orig.Strict()

	t.Run("schema", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, `{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":["integer","null"]},"tags":{"type":["array","null"],"items":{"type":"string"}},"sort":{"type":["string","null"],"enum":["asc","desc",null]},"any":{},"opts":{"type":["object","null"],"properties":{"deep":{"type":["boolean","null"]}},"required":["deep"],"additionalProperties":false},"meta":{"type":["object","null"],"additionalProperties":{"type":"string"}},"tree":{"anyOf":[{"$ref":"#/$defs/Node"},{"type":"null"}]}},"required":["query","limit","tags","sort","any","opts","meta","tree"],"additionalProperties":false,"$defs":{"Node":{"type":"object","properties":{"value":{"type":"integer"},"children":{"type":["array","null"],"items":{"anyOf":[{"$ref":"#/$defs/Node"},{"type":"null"}]}}},"required":["value","children"],"additionalProperties":false}}}`, string(s.JSON()))
	})
	t.Run("original unchanged", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, before, string(orig.JSON()))
	})

	tests := []struct {
		name  string
		input string
		want  string
	}{
		{"all present", `{"query":"q","limit":null,"tags":null,"sort":null,"any":null,"opts":null,"meta":null,"tree":null}`, ""},
		{"values", `{"query":"q","limit":3,"tags":["a"],"sort":"asc","any":[1],"opts":{"deep":true},"meta":{"k":"v"},"tree":{"value":1,"children":[{"value":2,"children":null}]}}`, ""},
		{"optional now required", `{"query":"q"}`, "any: is required; limit: is required; meta: is required; opts: is required; sort: is required; tags: is required; tree: is required"},
		{"unknown fields rejected", `{"query":"q","limit":null,"tags":null,"sort":null,"any":null,"opts":{"deep":null,"x":1},"meta":null,"tree":null,"extra":1}`,
			"extra: unknown field; opts.x: unknown field"},
		{"null only where optional", `{"query":null,"limit":null,"tags":null,"sort":null,"any":null,"opts":null,"meta":null,"tree":{"value":null,"children":null}}`,
			"query: expected string, got null; tree.value: expected integer, got null"},
		{"maps stay open", `{"query":"q","limit":null,"tags":null,"sort":null,"any":null,"opts":null,"meta":{"any":"key"},"tree":null}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := s.Validate(decode(t, tt.input))
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tt.want)
		})
	}
}
