package loop

import (
	"reflect"
	"slices"
)

// The in-memory stores copy everything they are given and everything they
// hand out, so a caller can never change stored data through a slice or map
// it still holds.

// memCloneEntries deep-copies entries; nil stays nil.
func memCloneEntries(in []Entry) []Entry {
	if in == nil {
		return nil
	}
	out := make([]Entry, len(in))
	for i := range in {
		out[i] = memCloneEntry(in[i])
	}
	return out
}

// memCloneEntry deep-copies one entry (Raw and Parts are the only reference
// fields; Part holds strings only).
func memCloneEntry(e Entry) Entry {
	e.Raw = slices.Clone(e.Raw)
	e.Parts = slices.Clone(e.Parts)
	return e
}

// memCloneHead deep-copies a run head.
func memCloneHead(h RunHead) RunHead {
	h.Output = memCloneValue(h.Output)
	if h.Error != nil {
		e := *h.Error
		h.Error = &e
	}
	h.ContextState = memCloneMap(h.ContextState)
	return h
}

// memCloneMap deep-copies a JSON-like map; nil stays nil.
func memCloneMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = memCloneValue(v)
	}
	return out
}

// memCloneValue deep-copies v. The JSON shapes (maps, slices, scalars) take
// a fast path; anything else is copied by reflection (exported fields,
// pointers, maps, slices and arrays are followed; unexported struct fields
// are copied by value).
func memCloneValue(v any) any {
	switch x := v.(type) {
	case nil, string, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return v
	case map[string]any:
		return memCloneMap(x)
	case []any:
		if x == nil {
			return x
		}
		out := make([]any, len(x))
		for i := range x {
			out[i] = memCloneValue(x[i])
		}
		return out
	}
	rv := reflect.ValueOf(v)
	return memCloneReflect(rv).Interface()
}

func memCloneReflect(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		p := reflect.New(v.Type().Elem())
		p.Elem().Set(memCloneReflect(v.Elem()))
		return p
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		c := memCloneReflect(v.Elem())
		out := reflect.New(v.Type()).Elem()
		out.Set(c)
		return out
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		it := v.MapRange()
		for it.Next() {
			out.SetMapIndex(memCloneReflect(it.Key()), memCloneReflect(it.Value()))
		}
		return out
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := 0; i < v.Len(); i++ {
			out.Index(i).Set(memCloneReflect(v.Index(i)))
		}
		return out
	case reflect.Array:
		out := reflect.New(v.Type()).Elem()
		for i := 0; i < v.Len(); i++ {
			out.Index(i).Set(memCloneReflect(v.Index(i)))
		}
		return out
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		for i := 0; i < v.NumField(); i++ {
			if f := out.Field(i); f.CanSet() {
				f.Set(memCloneReflect(v.Field(i)))
			}
		}
		return out
	default:
		return v
	}
}
