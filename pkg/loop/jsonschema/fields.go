package jsonschema

import (
	"cmp"
	"reflect"
	"slices"
	"strings"
	"unicode"
)

// field is a struct field as encoding/json sees it, after embedded structs
// are flattened and conflicting names resolved.
type field struct {
	name   string // JSON name
	tagged bool   // name came from the json tag
	index  []int
	sf     reflect.StructField
	owner  reflect.Type // the struct declaring sf
	omit   bool         // omitempty or omitzero
	quoted bool         // the ",string" option applies
	viaPtr bool         // promoted through an embedded pointer
}

// structFields lists the JSON-visible fields of struct type t in Go field
// order, with the rules of encoding/json: a breadth-first walk of embedded
// structs where shallower fields win, then tagged ones, and names that stay
// ambiguous are dropped.
func structFields(t reflect.Type) []field {
	type embedded struct {
		typ    reflect.Type
		index  []int
		viaPtr bool
	}
	var (
		current []embedded
		next    = []embedded{{typ: t}}
		count   map[reflect.Type]int
		nextCnt = map[reflect.Type]int{}
		visited = map[reflect.Type]bool{}
		fields  []field
	)
	for len(next) > 0 {
		current, next = next, current[:0]
		count, nextCnt = nextCnt, map[reflect.Type]int{}
		for _, e := range current {
			if visited[e.typ] {
				continue
			}
			visited[e.typ] = true
			for i := range e.typ.NumField() {
				sf := e.typ.Field(i)
				if sf.Anonymous {
					ft := sf.Type
					if ft.Kind() == reflect.Pointer {
						ft = ft.Elem()
					}
					if !sf.IsExported() && ft.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				if !isValidName(name) {
					name = ""
				}
				index := append(slices.Clip(e.index), i)
				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if name != "" || !sf.Anonymous || ft.Kind() != reflect.Struct {
					f := field{
						name:   cmp.Or(name, sf.Name),
						tagged: name != "",
						index:  index,
						sf:     sf,
						owner:  e.typ,
						omit:   hasOption(opts, "omitempty") || hasOption(opts, "omitzero"),
						quoted: hasOption(opts, "string") && isQuotable(ft.Kind()),
						viaPtr: e.viaPtr,
					}
					fields = append(fields, f)
					if count[e.typ] > 1 {
						// Several embeddings of the same type at this depth: a
						// duplicate makes the name ambiguous below.
						fields = append(fields, f)
					}
					continue
				}
				nextCnt[ft]++
				if nextCnt[ft] == 1 {
					next = append(next, embedded{
						typ:    ft,
						index:  index,
						viaPtr: e.viaPtr || sf.Type.Kind() == reflect.Pointer,
					})
				}
			}
		}
	}
	slices.SortFunc(fields, func(a, b field) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		if c := cmp.Compare(len(a.index), len(b.index)); c != 0 {
			return c
		}
		if a.tagged != b.tagged {
			if a.tagged {
				return -1
			}
			return 1
		}
		return slices.Compare(a.index, b.index)
	})
	out := fields[:0]
	for i := 0; i < len(fields); {
		j := i + 1
		for j < len(fields) && fields[j].name == fields[i].name {
			j++
		}
		// The first of a group dominates unless the second is as shallow and
		// as tagged.
		if j-i == 1 || len(fields[i].index) != len(fields[i+1].index) || fields[i].tagged != fields[i+1].tagged {
			out = append(out, fields[i])
		}
		i = j
	}
	slices.SortFunc(out, func(a, b field) int { return slices.Compare(a.index, b.index) })
	return out
}

func hasOption(opts, want string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == want {
			return true
		}
	}
	return false
}

func isQuotable(k reflect.Kind) bool {
	switch k {
	case reflect.Bool, reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// isValidName reports whether encoding/json accepts name from a tag.
func isValidName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range name {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}
