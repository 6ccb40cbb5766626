package jsonschema_test

import (
	"testing"

	"github.com/lovia-fleet/lovia/pkg/loop/jsonschema"
)

type twoInts struct {
	A int `json:"a"`
	B int `json:"b" jsonschema:"minimum=0"`
}

func BenchmarkValidate(b *testing.B) {
	s, err := jsonschema.For[twoInts]()
	if err != nil {
		b.Fatal(err)
	}
	strict := s.Strict()
	valid := map[string]any{"a": 1.0, "b": 2.0}
	invalid := map[string]any{"a": 1.5}

	b.Run("valid", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Validate(valid); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("strict", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := strict.Validate(valid); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("invalid", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Validate(invalid); err == nil {
				b.Fatal("no error")
			}
		}
	})
}

func BenchmarkValidateNested(b *testing.B) {
	s, err := jsonschema.For[all]()
	if err != nil {
		b.Fatal(err)
	}
	v := map[string]any{
		"i": 3.0, "s": "abc", "p": "aaa", "e": "red",
		"l":     []any{"x", "y"},
		"items": []any{map[string]any{"name": "a", "qty": 2.0}, map[string]any{"name": "b"}},
		"m":     map[string]any{"k": 1.0},
		"tree":  map[string]any{"value": 1.0, "children": []any{map[string]any{"value": 2.0}}},
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Validate(v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFor(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := jsonschema.For[all](); err != nil {
			b.Fatal(err)
		}
	}
}
