package jsonschema

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Validate checks v, a value as json.Unmarshal decodes it into an any:
// map[string]any, []any, float64 (or json.Number, with
// Decoder.UseNumber), string, bool or nil. It returns nil, a
// [*ValidationError] listing every issue, or, for a hand-built schema that
// does not compile, an error matching [ErrInvalidSchema].
//
// Validation walks the compiled schema with type switches: no reflection,
// and no allocation unless there are issues to report.
func (s *Schema) Validate(v any) error {
	p := s.prepared()
	if p.err != nil {
		return p.err
	}
	var st state
	st.check(p.root, v, seg{index: rootIndex})
	if len(st.issues) == 0 {
		return nil
	}
	slices.SortStableFunc(st.issues, func(a, b Issue) int { return comparePaths(a.Path, b.Path) })
	return &ValidationError{Issues: st.issues}
}

// ValidateJSON decodes data and validates the result. Bytes that are not
// JSON yield an error matching [ErrInvalidJSON].
func (s *Schema) ValidateJSON(data []byte) error {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidJSON, err)
	}
	return s.Validate(v)
}

// state collects the issues of one validation.
type state struct {
	issues []Issue
}

func (st *state) add(p seg, reason string) {
	st.issues = append(st.issues, Issue{Path: p.String(), Reason: reason})
}

func (st *state) typeIssue(n *node, p seg, got string) {
	st.add(p, n.expect+", got "+got)
}

func (st *state) check(n *node, v any, p seg) {
	if v == nil && n.nullable {
		return
	}
	if n.ref != nil {
		st.check(n.ref, v, p)
	}
	if n.allOf != nil || n.anyOf != nil || n.oneOf != nil || n.not != nil {
		st.combinators(n, v, p)
	}
	switch x := v.(type) {
	case nil:
		if n.types&tNull == 0 {
			st.typeIssue(n, p, "null")
		} else if n.enum != nil && !n.enum.null {
			st.add(p, n.enum.msg)
		}
	case bool:
		if n.types&tBool == 0 {
			st.typeIssue(n, p, "boolean")
		} else if n.enum != nil && !n.enum.bools[b2i(x)] {
			st.add(p, n.enum.msg)
		}
	case float64:
		st.number(n, x, p)
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			st.add(p, "invalid number "+strconv.Quote(string(x)))
			return
		}
		st.number(n, f, p)
	case string:
		st.string(n, x, p)
	case []any:
		st.array(n, x, p)
	case map[string]any:
		st.object(n, x, p)
	default:
		st.add(p, fmt.Sprintf("unsupported Go value of type %T (not a decoded JSON value)", v))
	}
}

func (st *state) number(n *node, f float64, p seg) {
	want := tNum
	if f == math.Trunc(f) {
		want = tInt
	}
	if n.types&want == 0 {
		st.typeIssue(n, p, "number")
		return
	}
	if n.enum != nil && !slices.Contains(n.enum.nums, f) {
		st.add(p, n.enum.msg)
	}
	for i := range n.bounds {
		b := &n.bounds[i]
		var ok bool
		switch {
		case b.upper && b.excl:
			ok = f < b.limit
		case b.upper:
			ok = f <= b.limit
		case b.excl:
			ok = f > b.limit
		default:
			ok = f >= b.limit
		}
		if !ok {
			st.add(p, b.msg)
		}
	}
}

func (st *state) string(n *node, s string, p seg) {
	if n.types&tStr == 0 {
		st.typeIssue(n, p, "string")
		return
	}
	if n.enum != nil && !slices.Contains(n.enum.strs, s) {
		st.add(p, n.enum.msg)
	}
	if n.minLen >= 0 || n.maxLen >= 0 {
		l := utf8.RuneCountInString(s)
		if n.minLen >= 0 && l < n.minLen {
			st.add(p, n.minLenMsg)
		}
		if n.maxLen >= 0 && l > n.maxLen {
			st.add(p, n.maxLenMsg)
		}
	}
	if n.re != nil && !n.re.MatchString(s) {
		st.add(p, n.reMsg)
	}
	if n.format != nil && !n.format(s) {
		st.add(p, n.formatMsg)
	}
}

func (st *state) array(n *node, a []any, p seg) {
	if n.types&tArr == 0 {
		st.typeIssue(n, p, "array")
		return
	}
	if n.enum != nil && !n.enum.hasOther(a) {
		st.add(p, n.enum.msg)
	}
	if n.minItems >= 0 && len(a) < n.minItems {
		st.add(p, n.minItemsMsg)
	}
	if n.maxItems >= 0 && len(a) > n.maxItems {
		st.add(p, n.maxItemsMsg)
	}
	for i, pn := range n.prefix {
		if i < len(a) {
			st.check(pn, a[i], seg{parent: &p, index: i})
		}
	}
	if n.items != nil {
		for i := len(n.prefix); i < len(a); i++ {
			st.check(n.items, a[i], seg{parent: &p, index: i})
		}
	}
}

func (st *state) object(n *node, m map[string]any, p seg) {
	if n.types&tObj == 0 {
		st.typeIssue(n, p, "object")
		return
	}
	if n.enum != nil && !n.enum.hasOther(m) {
		st.add(p, n.enum.msg)
	}
	declared := 0 // properties of m that Properties lists
	for i := range n.props {
		pr := &n.props[i]
		v, ok := m[pr.name]
		switch {
		case !ok:
			if pr.required {
				st.add(seg{parent: &p, key: pr.name, index: -1}, "is required")
			}
		case pr.node != nil:
			declared++
			st.check(pr.node, v, seg{parent: &p, key: pr.name, index: -1})
		}
	}
	if (!n.closed && n.values == nil) || declared == len(m) {
		return
	}
	for k, v := range m {
		if n.lookup(k) >= 0 {
			continue
		}
		if n.closed {
			st.add(seg{parent: &p, key: k, index: -1}, "unknown field")
		} else {
			st.check(n.values, v, seg{parent: &p, key: k, index: -1})
		}
	}
}

// hasOther reports whether an array or object value is in the enum.
func (e *enumSet) hasOther(v any) bool {
	for _, o := range e.other {
		if reflect.DeepEqual(o, v) {
			return true
		}
	}
	return false
}

// combinators checks allOf, anyOf, oneOf and not. A value that matches no
// branch of anyOf or oneOf gets the issues of the branch it comes closest
// to: the only one its type fits, or the one with the fewest issues; if
// its type fits none, one "expected ..., got ..." for all of them.
func (st *state) combinators(n *node, v any, p seg) {
	for _, sub := range n.allOf {
		st.check(sub, v, p)
	}
	if n.anyOf != nil {
		st.alternatives(n.anyOf, v, p, false)
	}
	if n.oneOf != nil {
		st.alternatives(n.oneOf, v, p, true)
	}
	if n.not != nil {
		var sub state
		sub.check(n.not, v, p)
		if len(sub.issues) == 0 {
			st.add(p, "must not match the schema under not")
		}
	}
}

func (st *state) alternatives(branches []*node, v any, p seg, exactlyOne bool) {
	kind := kindOf(v)
	var best []Issue
	matched, fits := 0, 0
	for _, b := range branches {
		var sub state
		sub.check(b, v, p)
		if len(sub.issues) == 0 {
			matched++
			if !exactlyOne {
				return
			}
			continue
		}
		if b.admitsKind(kind) {
			if fits == 0 || len(sub.issues) < len(best) {
				best = sub.issues
			}
			fits++
		}
	}
	switch {
	case matched == 1:
		return
	case matched > 1:
		st.add(p, "must match exactly one of the "+strconv.Itoa(len(branches))+" schemas of oneOf, matches "+strconv.Itoa(matched))
	case fits == 0:
		var names []string
		for _, b := range branches {
			for _, name := range b.typeNames() {
				if !slices.Contains(names, name) {
					names = append(names, name)
				}
			}
		}
		st.add(p, "expected "+strings.Join(names, " or ")+", got "+kindName(kind))
	default:
		st.issues = append(st.issues, best...)
	}
}

// kindOf returns the JSON type of a decoded value (tInt for an integral
// number), or 0 for a Go value that is not one.
func kindOf(v any) typeSet {
	switch x := v.(type) {
	case nil:
		return tNull
	case bool:
		return tBool
	case float64:
		if x == math.Trunc(x) {
			return tInt
		}
		return tNum
	case json.Number:
		if f, err := strconv.ParseFloat(string(x), 64); err == nil && f == math.Trunc(f) {
			return tInt
		}
		return tNum
	case string:
		return tStr
	case []any:
		return tArr
	case map[string]any:
		return tObj
	}
	return 0
}

func kindName(k typeSet) string {
	switch k {
	case tNull:
		return "null"
	case tBool:
		return "boolean"
	case tInt, tNum:
		return "number"
	case tStr:
		return "string"
	case tArr:
		return "array"
	case tObj:
		return "object"
	}
	return "a Go value that is not decoded JSON"
}

// admitsKind reports whether n's type (and that of what it refers to)
// admits values of kind k.
func (n *node) admitsKind(k typeSet) bool {
	for i := 0; n != nil && i < 64; i++ {
		if n.types&k == 0 && !(k == tNull && n.nullable) {
			return false
		}
		n = n.ref
	}
	return true
}

// typeNames lists the types n admits, for a message.
func (n *node) typeNames() []string {
	var out []string
	for _, t := range [...]struct {
		set  typeSet
		name string
	}{{tObj, TypeObject}, {tArr, TypeArray}, {tStr, TypeString}, {tInt | tNum, TypeNumber}, {tInt, TypeInteger}, {tBool, TypeBoolean}, {tNull, TypeNull}} {
		if n.types&t.set == t.set {
			out = append(out, t.name)
			if t.set == tInt|tNum {
				continue
			}
		}
	}
	if slices.Contains(out, TypeNumber) {
		out = slices.DeleteFunc(out, func(s string) bool { return s == TypeInteger })
	}
	if n.types == tAny {
		return []string{"any value"}
	}
	return out
}
