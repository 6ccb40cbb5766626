package jsonschema

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// prepared is what the first use of a Schema computes: the compiled
// validator and the encoding.
type prepared struct {
	root    *node
	err     error // compile error, returned by Validate
	json    []byte
	jsonErr error
}

func (s *Schema) prepared() *prepared {
	s.once.Do(func() { s.prep = prepare(s) })
	return s.prep
}

func prepare(s *Schema) *prepared {
	p := &prepared{}
	if p.json, p.jsonErr = appendSchema(nil, s); p.jsonErr == nil {
		p.json = slices.Clip(p.json) // appends by callers must not share it
	} else {
		p.json = nil
	}
	c := compiler{root: s, nodes: map[*Schema]*node{}}
	if p.root, p.err = c.compile(s, "#"); p.err == nil {
		p.err = c.checkRefCycles()
	}
	return p
}

// typeSet is a set of JSON types. Integers are their own member so that
// "integer" admits 2.0 but not 1.5, and "number" admits both.
type typeSet uint8

const (
	tNull typeSet = 1 << iota
	tBool
	tInt // integral numbers
	tNum // other numbers
	tStr
	tArr
	tObj
	tAny = tNull | tBool | tInt | tNum | tStr | tArr | tObj
)

func typeSetOf(name string) (typeSet, bool) {
	switch name {
	case "":
		return tAny, true
	case TypeNull:
		return tNull, true
	case TypeBoolean:
		return tBool, true
	case TypeInteger:
		return tInt, true
	case TypeNumber:
		return tInt | tNum, true
	case TypeString:
		return tStr, true
	case TypeArray:
		return tArr, true
	case TypeObject:
		return tObj, true
	}
	return 0, false
}

// node is a compiled schema: every check in the form the validator uses,
// every message precomputed. Nodes form a graph: $ref cycles are edges back.
type node struct {
	types    typeSet
	nullable bool
	expect   string // "expected integer or null"
	ref      *node
	enum     *enumSet

	allOf, anyOf, oneOf []*node
	not                 *node
	prefix              []*node // prefixItems

	bounds []bound

	minLen, maxLen       int // -1 when unset
	minLenMsg, maxLenMsg string
	re                   *regexp.Regexp
	reMsg                string
	format               func(string) bool
	formatMsg            string

	items                    *node
	minItems, maxItems       int // -1 when unset
	minItemsMsg, maxItemsMsg string

	props  []prop
	index  map[string]int // name to props index, for objects with many properties
	closed bool           // additionalProperties: false
	values *node          // schema of additional properties
}

type prop struct {
	name     string
	node     *node // nil for a required name that Properties does not list
	required bool
}

// bound is one numeric limit.
type bound struct {
	limit float64
	upper bool
	excl  bool
	msg   string
}

// lookup returns the index of the declared property name, or -1.
func (n *node) lookup(name string) int {
	if n.index != nil {
		if i, ok := n.index[name]; ok {
			return i
		}
		return -1
	}
	for i := range n.props {
		if n.props[i].name == name && n.props[i].node != nil {
			return i
		}
	}
	return -1
}

type compiler struct {
	root  *Schema
	nodes map[*Schema]*node
}

func (c *compiler) fail(path, detail string, cause error) error {
	if cause != nil {
		return fmt.Errorf("%w: %s: %s: %w", ErrInvalidSchema, path, detail, cause)
	}
	return fmt.Errorf("%w: %s: %s", ErrInvalidSchema, path, detail)
}

func (c *compiler) compile(s *Schema, path string) (*node, error) {
	if n, ok := c.nodes[s]; ok {
		return n, nil
	}
	n := &node{minLen: -1, maxLen: -1, minItems: -1, maxItems: -1}
	c.nodes[s] = n

	types, ok := typeSetOf(s.Type)
	if !ok {
		return nil, c.fail(path, "unknown type "+strconv.Quote(s.Type), nil)
	}
	names := []string{s.Type}
	if len(s.Types) > 0 {
		if s.Type != "" {
			return nil, c.fail(path, "both Type and Types are set", nil)
		}
		types, names = 0, s.Types
		for _, name := range s.Types {
			t, ok := typeSetOf(name)
			if !ok || name == "" {
				return nil, c.fail(path, "unknown type "+strconv.Quote(name), nil)
			}
			types |= t
		}
	}
	if s.Nullable {
		types |= tNull
	}
	n.types, n.nullable = types, s.Nullable
	if names[0] != "" {
		n.expect = "expected " + strings.Join(names, " or ")
		if s.Nullable && !slices.Contains(names, TypeNull) {
			n.expect += " or null"
		}
	}
	if s.Ref != "" {
		target, err := c.resolve(s.Ref, path)
		if err != nil {
			return nil, err
		}
		if n.ref, err = c.compile(target, s.Ref); err != nil {
			return nil, err
		}
	}
	if s.Enum != nil {
		e, err := newEnumSet(s.Enum)
		if err != nil {
			return nil, c.fail(path, "enum", err)
		}
		n.enum = e
	}
	var err error
	for _, l := range [...]struct {
		dst  *[]*node
		src  []*Schema
		name string
	}{{&n.allOf, s.AllOf, "allOf"}, {&n.anyOf, s.AnyOf, "anyOf"}, {&n.oneOf, s.OneOf, "oneOf"}, {&n.prefix, s.PrefixItems, "prefixItems"}} {
		if l.src != nil && len(l.src) == 0 && l.name != "prefixItems" {
			return nil, c.fail(path, l.name+" is an empty list", nil)
		}
		for i, sub := range l.src {
			sn, err := c.compile(orEmpty(sub), path+"/"+l.name+"/"+strconv.Itoa(i))
			if err != nil {
				return nil, err
			}
			*l.dst = append(*l.dst, sn)
		}
	}
	if s.Not != nil {
		if n.not, err = c.compile(s.Not, path+"/not"); err != nil {
			return nil, err
		}
	}
	if err := c.numbers(n, s, path); err != nil {
		return nil, err
	}
	if err := c.strings(n, s, path); err != nil {
		return nil, err
	}
	if err := c.arrays(n, s, path); err != nil {
		return nil, err
	}
	if err := c.objects(n, s, path); err != nil {
		return nil, err
	}
	return n, nil
}

func (c *compiler) resolve(ref, path string) (*Schema, error) {
	if ref == "#" {
		return c.root, nil
	}
	if name, ok := strings.CutPrefix(ref, "#/$defs/"); ok {
		name = strings.NewReplacer("~1", "/", "~0", "~").Replace(name)
		if d, ok := c.root.Defs[name]; ok && d != nil {
			return d, nil
		}
	}
	if d, ok := c.root.resolvePointer(ref); ok {
		return d, nil
	}
	if !strings.HasPrefix(ref, "#") {
		return nil, c.fail(path, "unsupported $ref "+strconv.Quote(ref)+": only references inside the document (starting with #) are resolved", nil)
	}
	return nil, c.fail(path, "$ref "+strconv.Quote(ref)+" names no entry of the root's $defs nor anything else in the document", nil)
}

// checkRefCycles rejects a cycle of $ref (through allOf, anyOf, oneOf and
// not too) that leads back to itself without descending into a value:
// validation would never end.
func (c *compiler) checkRefCycles() error {
	const (
		unseen = iota
		active
		done
	)
	mark := make(map[*node]int, len(c.nodes))
	var visit func(n *node) bool
	visit = func(n *node) bool {
		switch mark[n] {
		case active:
			return false
		case done:
			return true
		}
		mark[n] = active
		next := slices.Concat(n.allOf, n.anyOf, n.oneOf)
		if n.ref != nil {
			next = append(next, n.ref)
		}
		if n.not != nil {
			next = append(next, n.not)
		}
		for _, m := range next {
			if !visit(m) {
				return false
			}
		}
		mark[n] = done
		return true
	}
	for s, n := range c.nodes {
		if !visit(n) {
			at := s.Ref
			if at == "" {
				at = "#"
			}
			return c.fail(at, "$ref cycle that never reaches a schema", nil)
		}
	}
	return nil
}

func (c *compiler) numbers(n *node, s *Schema, path string) error {
	for _, b := range [...]struct {
		val         *float64
		upper, excl bool
		op          string
	}{
		{s.Minimum, false, false, ">="},
		{s.ExclusiveMinimum, false, true, ">"},
		{s.Maximum, true, false, "<="},
		{s.ExclusiveMaximum, true, true, "<"},
	} {
		if b.val == nil {
			continue
		}
		num, err := appendNumber(nil, *b.val)
		if err != nil {
			return c.fail(path, "bound", err)
		}
		n.bounds = append(n.bounds, bound{limit: *b.val, upper: b.upper, excl: b.excl, msg: "must be " + b.op + " " + string(num)})
	}
	return nil
}

func (c *compiler) strings(n *node, s *Schema, path string) error {
	var err error
	if n.minLen, err = count(s.MinLength, "minLength"); err != nil {
		return c.fail(path, "minLength", err)
	}
	if n.maxLen, err = count(s.MaxLength, "maxLength"); err != nil {
		return c.fail(path, "maxLength", err)
	}
	n.minLenMsg = "must be at least " + plural(n.minLen, "character") + " long"
	n.maxLenMsg = "must be at most " + plural(n.maxLen, "character") + " long"
	if s.Pattern != "" {
		n.re = s.re
		if n.re == nil || n.re.String() != s.Pattern {
			if n.re, err = regexp.Compile(s.Pattern); err != nil {
				return c.fail(path, "pattern", err)
			}
		}
		n.reMsg = "must match pattern " + s.Pattern
	}
	if s.Format != "" {
		n.format = formatChecker(s.Format)
		n.formatMsg = "must be a valid " + s.Format
	}
	return nil
}

func (c *compiler) arrays(n *node, s *Schema, path string) error {
	var err error
	if n.minItems, err = count(s.MinItems, "minItems"); err != nil {
		return c.fail(path, "minItems", err)
	}
	if n.maxItems, err = count(s.MaxItems, "maxItems"); err != nil {
		return c.fail(path, "maxItems", err)
	}
	n.minItemsMsg = "must have at least " + plural(n.minItems, "item")
	n.maxItemsMsg = "must have at most " + plural(n.maxItems, "item")
	if s.Items != nil {
		if n.items, err = c.compile(s.Items, path+"/items"); err != nil {
			return err
		}
	}
	return nil
}

func (c *compiler) objects(n *node, s *Schema, path string) error {
	seen := make(map[string]bool, len(s.Properties))
	for _, p := range s.Properties {
		if seen[p.Name] {
			continue // a JSON object has one value per name: the first wins
		}
		seen[p.Name] = true
		ps := p.Schema
		if ps == nil {
			ps = &Schema{}
		}
		pn, err := c.compile(ps, path+"/properties/"+p.Name)
		if err != nil {
			return err
		}
		n.props = append(n.props, prop{name: p.Name, node: pn})
	}
	for _, r := range s.Required {
		found := false
		for i := range n.props {
			if n.props[i].name == r {
				n.props[i].required, found = true, true
			}
		}
		if !found {
			n.props = append(n.props, prop{name: r, required: true})
		}
	}
	if len(n.props) > 8 {
		n.index = make(map[string]int, len(n.props))
		for i := len(n.props) - 1; i >= 0; i-- {
			if n.props[i].node != nil {
				n.index[n.props[i].name] = i
			}
		}
	}
	n.closed = s.AdditionalProperties != nil && !*s.AdditionalProperties
	if s.Values != nil && !n.closed {
		var err error
		if n.values, err = c.compile(s.Values, path+"/additionalProperties"); err != nil {
			return err
		}
	}
	return nil
}

// count reads an optional non-negative limit; -1 when unset.
func count(p *int, name string) (int, error) {
	if p == nil {
		return -1, nil
	}
	if *p < 0 {
		return 0, fmt.Errorf("%s is negative: %d", name, *p)
	}
	return *p, nil
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return strconv.Itoa(n) + " " + unit + "s"
}

// enumSet holds the admitted values by JSON type, so that matching needs no
// reflection (arrays and objects, rare in enums, are compared deeply).
type enumSet struct {
	strs  []string
	nums  []float64
	bools [2]bool // [false, true]
	null  bool
	other []any
	msg   string
}

func newEnumSet(values []any) (*enumSet, error) {
	e := &enumSet{}
	msg := []byte("must be one of ")
	for i, v := range values {
		if i > 0 {
			msg = append(msg, ", "...)
		}
		var err error
		if msg, err = appendValue(msg, v); err != nil {
			return nil, err
		}
		if jn, ok := v.(json.Number); ok {
			f, err := jn.Float64()
			if err != nil {
				return nil, err
			}
			v = f
		}
		if f, ok := toFloat(v); ok {
			e.nums = append(e.nums, f)
			continue
		}
		switch x := v.(type) {
		case nil:
			e.null = true
		case string:
			e.strs = append(e.strs, x)
		case bool:
			e.bools[b2i(x)] = true
		default:
			// Normalise to what json.Unmarshal produces.
			enc, err := json.Marshal(x)
			if err != nil {
				return nil, err
			}
			var dec any
			if err := json.Unmarshal(enc, &dec); err != nil {
				return nil, err
			}
			e.other = append(e.other, dec)
		}
	}
	e.msg = string(msg)
	if len(values) == 0 {
		e.msg = "admits no value (the enum is empty)"
	}
	return e, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// toFloat converts Go numbers to float64.
func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int8:
		return float64(x), true
	case int16:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint:
		return float64(x), true
	case uint8:
		return float64(x), true
	case uint16:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint64:
		return float64(x), true
	}
	return 0, false
}
