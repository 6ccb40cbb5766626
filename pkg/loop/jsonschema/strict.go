package jsonschema

// Strict returns a copy of s for providers' strict mode (OpenAI structured
// outputs): every object that is not a map lists all its properties in
// Required and rejects additional properties, recursively, $defs included.
// A property that was optional becomes nullable, so the model sends null to
// leave it out (encoding/json then leaves the Go field as it was). Maps
// (objects with Values) stay open: strict mode cannot express them.
//
// The copy is compiled like a derived schema and ready for concurrent use.
func (s *Schema) Strict() *Schema {
	c := s.Clone()
	strictify(c)
	c.prepared()
	return c
}

func strictify(s *Schema) {
	if s == nil {
		return
	}
	if (s.Type == TypeObject || s.Properties != nil) && s.Values == nil {
		required := make([]string, 0, len(s.Properties))
		for _, p := range s.Properties {
			if !s.IsRequired(p.Name) && p.Schema != nil && (p.Schema.Type != "" || p.Schema.Ref != "") {
				p.Schema.Nullable = true
			}
			required = append(required, p.Name)
		}
		s.Required = required
		s.AdditionalProperties = ptr(false)
	}
	strictify(s.Items)
	strictify(s.Values)
	strictify(s.Not)
	for _, l := range [][]*Schema{s.PrefixItems, s.AllOf, s.AnyOf, s.OneOf} {
		for _, sub := range l {
			strictify(sub)
		}
	}
	for _, p := range s.Properties {
		strictify(p.Schema)
	}
	for _, d := range s.Defs {
		strictify(d)
	}
}
