package jsonschema

import (
	"cmp"
	"strconv"
	"strings"
)

// seg is one step of the path to a value, linked to its parent. Segments
// live on the validator's stack; a path is rendered only for an issue.
type seg struct {
	parent *seg
	key    string
	index  int // array index, -1 for a property key, rootIndex for the root
}

const rootIndex = -2

// String renders the path from the root: items[2].name, meta["a.b"].
func (p *seg) String() string {
	var b strings.Builder
	p.write(&b)
	return b.String()
}

func (p *seg) write(b *strings.Builder) {
	if p.parent != nil {
		p.parent.write(b)
	}
	switch {
	case p.index == rootIndex:
	case p.index >= 0:
		b.WriteByte('[')
		b.WriteString(strconv.Itoa(p.index))
		b.WriteByte(']')
	case isPlainKey(p.key):
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p.key)
	default:
		b.WriteByte('[')
		b.WriteString(strconv.Quote(p.key))
		b.WriteByte(']')
	}
}

// isPlainKey reports whether key can be written after a dot.
func isPlainKey(key string) bool {
	if key == "" {
		return false
	}
	for i := range len(key) {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '$') {
			return false
		}
	}
	return true
}

// comparePaths orders paths bytewise, except that runs of digits compare
// by value, so items[2] sorts before items[10]. Paths equal by that
// measure (a key "0" and a key "00") fall back to bytewise order, so the
// order is total and a validation's message is deterministic.
func comparePaths(a, b string) int {
	if c := compareNatural(a, b); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func compareNatural(a, b string) int {
	for a != "" && b != "" {
		if isDigit(a[0]) && isDigit(b[0]) {
			i, j := digitRun(a), digitRun(b)
			da, db := strings.TrimLeft(a[:i], "0"), strings.TrimLeft(b[:j], "0")
			if c := cmp.Compare(len(da), len(db)); c != 0 {
				return c
			}
			if c := strings.Compare(da, db); c != 0 {
				return c
			}
			a, b = a[i:], b[j:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func digitRun(s string) int {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}
