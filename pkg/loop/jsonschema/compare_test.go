package jsonschema_test

// Ours against github.com/google/jsonschema-go (the MCP SDK's schema
// package) on the loop's cases: derivation of a tool's input struct,
// validation of valid and invalid arguments, and the message the model
// reads when the arguments are invalid. BENCHMARKS.md records the numbers.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	google "github.com/google/jsonschema-go/jsonschema"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop/jsonschema"
)

// searchArgs is a typical tool input: constraints in tags.
type searchArgs struct {
	Query string   `json:"query" desc:"what to look for" jsonschema:"minLength=1,maxLength=200"`
	Limit int      `json:"limit,omitempty" jsonschema:"minimum=1,maximum=50,default=10"`
	Sort  string   `json:"sort,omitempty" jsonschema:"enum=relevance|date"`
	Tags  []string `json:"tags,omitempty" jsonschema:"maxItems=5"`
	Since *string  `json:"since" jsonschema:"format=date"`
}

// searchArgsGoogle is searchArgs as google's For can read it: its
// `jsonschema` tag is the description only and rejects key=value pairs.
type searchArgsGoogle struct {
	Query string   `json:"query" jsonschema:"what to look for"`
	Limit int      `json:"limit,omitempty"`
	Sort  string   `json:"sort,omitempty"`
	Tags  []string `json:"tags,omitempty"`
	Since *string  `json:"since"`
}

// schemas returns the same schema for both: ours derived from searchArgs,
// google's decoded from our encoding (so both check the same keywords).
func compareSchemas(t testing.TB) (*jsonschema.Schema, *google.Resolved) {
	ours, err := jsonschema.For[searchArgs]()
	require.NoError(t, err)
	var g google.Schema
	require.NoError(t, json.Unmarshal(ours.JSON(), &g))
	rs, err := g.Resolve(nil)
	require.NoError(t, err)
	return ours, rs
}

func decodeArgs(t testing.TB, s string) any {
	var v any
	require.NoError(t, json.Unmarshal([]byte(s), &v))
	return v
}

const (
	validArgs = `{"query":"nats","limit":10,"sort":"date","tags":["a","b"],"since":"2026-01-02"}`
	// Three faults: a wrong type, an enum miss and an array too long.
	invalidArgs = `{"query":"nats","limit":"10","sort":"size","tags":["a","b","c","d","e","f"]}`
)

// invalidCases are arguments a model gets wrong, for the message table.
var invalidCases = []struct{ name, args string }{
	{"wrong type", `{"query":"nats","limit":"10","since":null}`},
	{"missing required", `{"limit":10,"since":null}`},
	{"enum", `{"query":"nats","sort":"size","since":null}`},
	{"bound", `{"query":"nats","limit":99,"since":null}`},
	{"empty string", `{"query":"","since":null}`},
	{"format", `{"query":"nats","since":"yesterday"}`},
	{"array length", `{"query":"nats","tags":["a","b","c","d","e","f"],"since":null}`},
	{"not an object", `["nats"]`},
	{"three faults", invalidArgs},
}

// TestCompareMessages prints, for each invalid case, the message each
// implementation's error gives the model (run with -v to see the table),
// and checks the properties the comparison in BENCHMARKS.md relies on:
// ours names every fault and checks formats, google's stops at the first
// fault and does not check formats.
func TestCompareMessages(t *testing.T) {
	ours, theirs := compareSchemas(t)
	var table strings.Builder
	for _, c := range invalidCases {
		v := decodeArgs(t, c.args)
		oe, ge := ours.Validate(v), theirs.Validate(v)
		require.Error(t, oe, c.name)
		if c.name == "format" {
			require.NoError(t, ge, "google's treats format as an annotation")
		} else {
			require.Error(t, ge, c.name)
		}
		fmt.Fprintf(&table, "%s %s\n  ours:   %v\n  google: %v\n", c.name, c.args, oe, ge)
	}
	t.Log("\n" + table.String())

	v := decodeArgs(t, invalidArgs)
	var ve *jsonschema.ValidationError
	require.ErrorAs(t, ours.Validate(v), &ve)
	require.Len(t, ve.Issues, 3, "ours reports every fault")
	named, msg := 0, theirs.Validate(v).Error() // its first fault depends on map order
	for _, field := range []string{"limit", "sort", "tags"} {
		if strings.Contains(msg, "/properties/"+field) {
			named++
		}
	}
	require.Equal(t, 1, named, "google's stops at its first fault")
}

// TestCompareDerivation shows what google's For cannot take from the same
// Go type: constraints in tags are an error, a `desc` tag is ignored.
func TestCompareDerivation(t *testing.T) {
	_, err := google.For[searchArgs](nil)
	require.ErrorContains(t, err, "must not begin with 'WORD='")

	g, err := google.For[searchArgsGoogle](nil)
	require.NoError(t, err)
	b, err := json.Marshal(g)
	require.NoError(t, err)
	ours, err := jsonschema.For[searchArgs]()
	require.NoError(t, err)
	t.Logf("\nours:   %s\ngoogle: %s", ours.JSON(), b)
}

func BenchmarkCompareValidate(b *testing.B) {
	ours, theirs := compareSchemas(b)
	for _, c := range []struct {
		name string
		v    any
	}{{"valid", decodeArgs(b, validArgs)}, {"invalid", decodeArgs(b, invalidArgs)}} {
		wantErr := c.name == "invalid"
		b.Run(c.name+"/ours", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := ours.Validate(c.v); (err != nil) != wantErr {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/google", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := theirs.Validate(c.v); (err != nil) != wantErr {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCompareDerive(b *testing.B) {
	b.Run("ours", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s, err := jsonschema.For[searchArgs]()
			if err != nil {
				b.Fatal(err)
			}
			_ = s.JSON() // compiles: what NewTool pays once
		}
	})
	b.Run("google", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s, err := google.For[searchArgsGoogle](nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Resolve(nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCompareMCP validates arguments against a schema an MCP server
// really sends (server-filesystem's edit_file), parsed by each.
func BenchmarkCompareMCP(b *testing.B) {
	doc := realSchemas(b, "testdata/mcp/server-filesystem.json")["fs__edit_file"]
	ours, err := jsonschema.Parse(doc)
	require.NoError(b, err)
	var g google.Schema
	require.NoError(b, json.Unmarshal(doc, &g))
	theirs, err := g.Resolve(nil)
	require.NoError(b, err)
	for _, c := range []struct{ name, args string }{
		{"valid", `{"path":"notes/a.txt","edits":[{"oldText":"a","newText":"b"},{"oldText":"c","newText":"d"}],"dryRun":true}`},
		{"invalid", `{"path":1,"edits":[{"oldText":"a"}],"dryRun":"yes"}`},
	} {
		v, wantErr := decodeArgs(b, c.args), c.name == "invalid"
		b.Run(c.name+"/ours", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := ours.Validate(v); (err != nil) != wantErr {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/google", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := theirs.Validate(v); (err != nil) != wantErr {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("parse/ours", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := jsonschema.Parse(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parse/google", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var g google.Schema
			if err := json.Unmarshal(doc, &g); err != nil {
				b.Fatal(err)
			}
			if _, err := g.Resolve(nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
