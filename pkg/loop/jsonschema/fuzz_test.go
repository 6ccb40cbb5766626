package jsonschema_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/lovia-fleet/lovia/pkg/loop/jsonschema"
)

// FuzzValidate decodes arbitrary bytes and validates them against a schema
// that uses every rule, plain and strict: it must never panic, and an error
// must be a non-empty, deterministic ValidationError.
func FuzzValidate(f *testing.F) {
	for _, seed := range []string{
		`{}`,
		`null`,
		`[]`,
		`"x"`,
		`1.5`,
		`{"i":2.0,"x":5,"f":-1e-9,"s":"ééé","p":"aaa","e":"red","en":1,"eb":true,"b":false}`,
		`{"t":"2024-05-01T10:00:00Z","mail":"a@b.c","id":"123e4567-e89b-12d3-a456-426614174000"}`,
		`{"l":["a","b","c"],"items":[{"name":"a","qty":0},{"qty":1.5},null]}`,
		`{"m":{"a":256,"":-1,"a.b":"x"},"deep":{"k":[{"name":false}]}}`,
		`{"ptr":null,"any":[1,{"a":[null]}],"raw":"x"}`,
		`{"tree":{"value":1,"children":[{"value":2,"children":[null,{"value":"3"}]}]}}`,
		`{"i":1e400}`,
		`{"s":"\ud800"}`,
	} {
		f.Add([]byte(seed))
	}
	plain, err := jsonschema.For[all]()
	if err != nil {
		f.Fatal(err)
	}
	strict := plain.Strict()

	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if json.Unmarshal(data, &v) != nil {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var n any
		if err := dec.Decode(&n); err != nil {
			t.Fatalf("UseNumber decoding failed where Unmarshal did not: %v", err)
		}
		for _, s := range []*jsonschema.Schema{plain, strict} {
			for _, value := range []any{v, n} {
				err := s.Validate(value)
				if err == nil {
					continue
				}
				var ve *jsonschema.ValidationError
				if !errors.As(err, &ve) || len(ve.Issues) == 0 {
					t.Fatalf("error is not a non-empty ValidationError: %v", err)
				}
				if again := s.Validate(value); again == nil || again.Error() != err.Error() {
					t.Fatalf("not deterministic: %v, then %v", err, again)
				}
			}
		}
	})
}
