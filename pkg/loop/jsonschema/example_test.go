package jsonschema_test

import (
	"encoding/json"
	"fmt"

	"github.com/lovia-fleet/lovia/pkg/loop/jsonschema"
)

func ExampleFor() {
	type Search struct {
		Query string   `json:"query" desc:"What to look for" jsonschema:"minLength=1"`
		Limit int      `json:"limit,omitempty" jsonschema:"minimum=1,maximum=50"`
		Tags  []string `json:"tags,omitempty" jsonschema:"enum=news|blog"`
	}
	schema, err := jsonschema.For[Search]()
	if err != nil {
		panic(err)
	}
	fmt.Println(string(schema.JSON()))

	var args any
	_ = json.Unmarshal([]byte(`{"limit":2.5,"tags":["news","video"]}`), &args)
	fmt.Println(schema.Validate(args))
	// Output:
	// {"type":"object","properties":{"query":{"type":"string","description":"What to look for","minLength":1},"limit":{"type":"integer","minimum":1,"maximum":50},"tags":{"type":"array","items":{"type":"string","enum":["news","blog"]}}},"required":["query"]}
	// limit: expected integer, got number; query: is required; tags[1]: must be one of "news", "blog"
}

func ExampleSchema_Strict() {
	type Lookup struct {
		ID   string `json:"id"`
		Lang string `json:"lang,omitempty"`
	}
	schema, err := jsonschema.For[Lookup]()
	if err != nil {
		panic(err)
	}
	strict := schema.Strict()
	fmt.Println(strict)
	fmt.Println(strict.Validate(map[string]any{"id": "x", "lang": nil}))
	fmt.Println(strict.Validate(map[string]any{"id": "x", "extra": true}))
	// Output:
	// {"type":"object","properties":{"id":{"type":"string"},"lang":{"type":["string","null"]}},"required":["id","lang"],"additionalProperties":false}
	// <nil>
	// extra: unknown field; lang: is required
}

// An MCP server's tool schema, parsed: the arguments are checked, and the
// model told what is wrong, as for a Go tool.
func ExampleParse() {
	schema, err := jsonschema.Parse([]byte(`{
		"$schema": "http://json-schema.org/draft-07/schema#",
		"type": "object",
		"properties": {
			"path": {"type": "string"},
			"depth": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]},
			"mode": {"type": "string", "enum": ["list", "tree"]}
		},
		"required": ["path"],
		"additionalProperties": false
	}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(schema.ValidateJSON([]byte(`{"depth": 0, "mode": "flat", "recursive": true}`)))
	fmt.Println(schema.ValidateJSON([]byte(`{"path": "/tmp", "depth": null}`)))
	// Output:
	// depth: must be >= 1; mode: must be one of "list", "tree"; path: is required; recursive: unknown field
	// <nil>
}
