package catalog

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// fieldError is an invalid value of one field of an agent's section,
// named by its path (settings.temperature); Line is its line in the
// agents file when it was read from YAML (0: from JSON, the registry).
type fieldError struct {
	Field string
	Line  int
	Msg   string
}

func (e *fieldError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s: %s", e.Line, e.Field, e.Msg)
	}
	return e.Field + ": " + e.Msg
}

func fieldErr(field, format string, args ...any) *fieldError {
	return &fieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// atLine gives err, a *fieldError of section n's key, the line of that
// key (or of the section).
func atLine(err error, n *yaml.Node) error {
	var fe *fieldError
	if !errors.As(err, &fe) || fe.Line > 0 {
		return err
	}
	fe.Line = n.Line
	_, key, _ := strings.Cut(fe.Field, ".")
	key, _, _ = strings.Cut(key, ".")
	key, _, _ = strings.Cut(key, "[")
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			fe.Line = n.Content[i].Line
		}
	}
	return fe
}

// checkKeys refuses a section that is not a map, and the keys of the map
// that t's yaml tags do not name, listing those that exist. yaml.v3 does
// not check the keys of a node a custom unmarshaler decodes.
func checkKeys(n *yaml.Node, t reflect.Type, section, example string) error {
	known := yamlKeys(t)
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: %s must be a map of %s, e.g. `%s`", n.Line, section, strings.Join(known, ", "), example)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; !contains(known, k.Value) {
			return fmt.Errorf("line %d: unknown key %q in %s (known: %s)", k.Line, k.Value, section, strings.Join(known, ", "))
		}
	}
	return nil
}

// isOff reports whether n is the scalar `off` (a section switched off).
func isOff(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!str" && n.Value == "off"
}

// agentLines returns, for each agent of the file's `agents:` list, the
// line of each of its keys, so that errors found after decoding (an
// unknown agent in as_tools, a missing instructions_file) can name it.
func agentLines(data []byte) []map[string]int {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil
	}
	var out []map[string]int
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "agents" || root.Content[i+1].Kind != yaml.SequenceNode {
			continue
		}
		for _, a := range root.Content[i+1].Content {
			m := map[string]int{"": a.Line}
			for j := 0; j+1 < len(a.Content); j += 2 {
				m[a.Content[j].Value] = a.Content[j].Line
			}
			out = append(out, m)
		}
	}
	return out
}

// at names key of s and its line in the agents file, when known:
// "as_tools (line 12)".
func (s *Spec) at(key string) string {
	if l := s.lines[key]; l > 0 {
		return fmt.Sprintf("%s (line %d)", key, l)
	}
	return key
}
