package jsonschema

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strconv"
	"time"
)

// SchemaProvider is implemented by types that describe themselves. Derivation
// calls JSONSchema on a zero value (through a pointer, so either receiver
// works) and uses a copy of the result; field tags still apply on top. The
// result must not use $ref.
type SchemaProvider interface {
	JSONSchema() *Schema
}

var (
	timeType            = reflect.TypeFor[time.Time]()
	rawMessageType      = reflect.TypeFor[json.RawMessage]()
	providerType        = reflect.TypeFor[SchemaProvider]()
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// For derives the schema of T; see [Reflect].
func For[T any]() (*Schema, error) {
	return Reflect(reflect.TypeFor[T]())
}

// Reflect derives the schema of t, following the rules in the package
// documentation, and compiles it: the returned schema is ready for
// concurrent use. A pointer root type yields the schema of its element (not
// nullable). The error is a [*DeriveError] naming the field that cannot be
// described, or, when a [SchemaProvider] returns a schema that does not
// compile, an error matching [ErrInvalidSchema].
func Reflect(t reflect.Type) (*Schema, error) {
	if t == nil {
		return nil, &DeriveError{Err: ErrUnsupportedType, Detail: "nil type (an interface value with no type)"}
	}
	d := &deriver{
		names: map[reflect.Type]string{},
		stack: map[reflect.Type]bool{},
		taken: map[string]bool{},
		defs:  map[string]*Schema{},
	}
	root, err := d.deref(t, loc{})
	if err != nil {
		return nil, err
	}
	s, err := d.schema(root, loc{})
	if err != nil {
		return nil, err
	}
	if name, ok := d.names[root]; ok {
		// The root type is recursive: it becomes the root itself, and
		// references to it point at "#".
		ref := defRef(name)
		s = d.defs[name]
		delete(d.defs, name)
		for _, r := range d.refs {
			if r.Ref == ref {
				r.Ref = "#"
			}
		}
	}
	if len(d.defs) > 0 {
		s.Defs = d.defs
	}
	if p := s.prepared(); p.err != nil {
		return nil, p.err
	}
	return s, nil
}

// loc is where derivation is, for error messages.
type loc struct {
	path  string // JSON path, such as items[].name
	field string // Go field, such as Item.Name
}

func (l loc) prop(name, field string) loc {
	if l.path != "" {
		name = l.path + "." + name
	}
	return loc{path: name, field: field}
}

func (l loc) elem(suffix string) loc { return loc{path: l.path + suffix, field: l.field} }

type deriver struct {
	names map[reflect.Type]string // recursive types and their $defs names
	stack map[reflect.Type]bool   // named types being derived
	taken map[string]bool         // $defs names in use
	defs  map[string]*Schema
	refs  []*Schema // every $ref node made, for rewriting
}

func (d *deriver) fail(at loc, t reflect.Type, sentinel error, detail string, cause error) error {
	return &DeriveError{Path: at.path, Field: at.field, Type: t, Err: sentinel, Detail: detail, Cause: cause}
}

// deref follows pointers to the first non-pointer type.
func (d *deriver) deref(t reflect.Type, at loc) (reflect.Type, error) {
	var seen []reflect.Type
	for t.Kind() == reflect.Pointer {
		for _, s := range seen {
			if s == t {
				return nil, d.fail(at, t, ErrUnsupportedType, "pointer type that points to itself", nil)
			}
		}
		seen = append(seen, t)
		t = t.Elem()
	}
	return t, nil
}

func (d *deriver) ref(name string) *Schema {
	s := &Schema{Ref: defRef(name)}
	d.refs = append(d.refs, s)
	return s
}

func defRef(name string) string { return "#/$defs/" + name }

// schema derives a fresh schema for t: callers may modify it.
func (d *deriver) schema(t reflect.Type, at loc) (*Schema, error) {
	if t.Kind() == reflect.Pointer {
		elem, err := d.deref(t, at)
		if err != nil {
			return nil, err
		}
		s, err := d.schema(elem, at)
		if err != nil {
			return nil, err
		}
		if s.Type != "" || s.Ref != "" {
			s.Nullable = true
		}
		return s, nil
	}
	if s, ok := d.special(t); ok {
		return s, nil
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Slice, reflect.Array, reflect.Map:
	default:
		return d.build(t, at)
	}
	if t.Name() == "" {
		// Only named types can recur, so unnamed ones need no tracking.
		return d.build(t, at)
	}
	if name, ok := d.names[t]; ok {
		return d.ref(name), nil
	}
	if d.stack[t] {
		name := d.defName(t)
		d.names[t] = name
		return d.ref(name), nil
	}
	d.stack[t] = true
	s, err := d.build(t, at)
	delete(d.stack, t)
	if err != nil {
		return nil, err
	}
	if name, ok := d.names[t]; ok {
		d.defs[name] = s
		return d.ref(name), nil
	}
	return s, nil
}

// special handles types whose JSON form is not their Go structure.
func (d *deriver) special(t reflect.Type) (*Schema, bool) {
	pt := reflect.PointerTo(t)
	switch {
	case pt.Implements(providerType):
		p := reflect.New(t).Interface().(SchemaProvider).JSONSchema()
		if p == nil {
			return &Schema{}, true
		}
		return p.Clone(), true
	case t == timeType:
		return &Schema{Type: TypeString, Format: "date-time"}, true
	case t == rawMessageType:
		return &Schema{}, true
	case pt.Implements(jsonUnmarshalerType):
		return &Schema{}, true
	case pt.Implements(textUnmarshalerType):
		return &Schema{Type: TypeString}, true
	}
	return nil, false
}

func (d *deriver) build(t reflect.Type, at loc) (*Schema, error) {
	switch t.Kind() {
	case reflect.Bool:
		return &Schema{Type: TypeBoolean}, nil
	case reflect.Int, reflect.Int64:
		return &Schema{Type: TypeInteger}, nil
	case reflect.Int8, reflect.Int16, reflect.Int32:
		lim := float64(int64(1) << (t.Bits() - 1))
		return &Schema{Type: TypeInteger, Minimum: ptr(-lim), Maximum: ptr(lim - 1)}, nil
	case reflect.Uint, reflect.Uint64, reflect.Uintptr:
		return &Schema{Type: TypeInteger, Minimum: ptr(0.0)}, nil
	case reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return &Schema{Type: TypeInteger, Minimum: ptr(0.0), Maximum: ptr(float64(uint64(1)<<t.Bits() - 1))}, nil
	case reflect.Float32, reflect.Float64:
		return &Schema{Type: TypeNumber}, nil
	case reflect.String:
		return &Schema{Type: TypeString}, nil
	case reflect.Interface:
		return &Schema{}, nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			// encoding/json carries []byte as a base64 string.
			return &Schema{Type: TypeString, ContentEncoding: "base64"}, nil
		}
		items, err := d.schema(t.Elem(), at.elem("[]"))
		if err != nil {
			return nil, err
		}
		return &Schema{Type: TypeArray, Items: items}, nil
	case reflect.Array:
		items, err := d.schema(t.Elem(), at.elem("[]"))
		if err != nil {
			return nil, err
		}
		return &Schema{Type: TypeArray, Items: items, MinItems: ptr(t.Len()), MaxItems: ptr(t.Len())}, nil
	case reflect.Map:
		if !mapKeyOK(t.Key()) {
			return nil, d.fail(at, t, ErrUnsupportedType, "map keys must be strings, integers or encoding.TextUnmarshaler", nil)
		}
		values, err := d.schema(t.Elem(), at.elem("[]"))
		if err != nil {
			return nil, err
		}
		return &Schema{Type: TypeObject, Values: values}, nil
	case reflect.Struct:
		return d.object(t, at)
	}
	return nil, d.fail(at, t, ErrUnsupportedType, t.Kind().String()+" has no JSON form", nil)
}

func mapKeyOK(k reflect.Type) bool {
	switch k.Kind() {
	case reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return true
	}
	return reflect.PointerTo(k).Implements(textUnmarshalerType)
}

func (d *deriver) object(t reflect.Type, at loc) (*Schema, error) {
	fields := structFields(t)
	s := &Schema{Type: TypeObject, Properties: make([]Property, 0, len(fields))}
	for _, f := range fields {
		goField := f.sf.Name
		if f.owner.Name() != "" {
			goField = f.owner.Name() + "." + goField
		}
		fat := at.prop(f.name, goField)
		var fs *Schema
		if f.quoted {
			// ",string" carries the value inside a JSON string.
			fs = &Schema{Type: TypeString, Nullable: f.sf.Type.Kind() == reflect.Pointer}
		} else {
			var err error
			if fs, err = d.schema(f.sf.Type, fat); err != nil {
				return nil, err
			}
		}
		required := !f.omit && !f.viaPtr && f.sf.Type.Kind() != reflect.Pointer
		if desc, ok := f.sf.Tag.Lookup("desc"); ok {
			fs.Description = desc
		}
		if tag, ok := f.sf.Tag.Lookup("jsonschema"); ok {
			var err error
			if required, err = d.applyTag(fs, f.sf.Type, tag, required, fat); err != nil {
				return nil, err
			}
		}
		s.Properties = append(s.Properties, Property{Name: f.name, Schema: fs})
		if required {
			s.Required = append(s.Required, f.name)
		}
	}
	return s, nil
}

func (d *deriver) defName(t reflect.Type) string {
	base := []byte(t.Name())
	for i, c := range base {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			base[i] = '_'
		}
	}
	name := string(base)
	for i := 2; d.taken[name]; i++ {
		name = string(base) + strconv.Itoa(i)
	}
	d.taken[name] = true
	return name
}
