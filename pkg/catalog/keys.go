package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// What each YAML type of the agents file is called in error messages.
var sections = map[string]reflect.Type{
	"File":       reflect.TypeFor[File](),
	"Spec":       reflect.TypeFor[Spec](),
	"ScriptStep": reflect.TypeFor[ScriptStep](),
	"ScriptCall": reflect.TypeFor[ScriptCall](),
	"RawCall":    reflect.TypeFor[RawCall](),
	"MCPServer":  reflect.TypeFor[MCPServer](),
	"HTTPSpec":   reflect.TypeFor[HTTPSpec](),
}

var sectionNames = map[string]string{
	"File":       "the file",
	"Spec":       "an agent",
	"ScriptStep": "a script step",
	"ScriptCall": "a scripted call",
	"RawCall":    "a raw_call",
	"MCPServer":  "an MCP server",
	"HTTPSpec":   "the http section",
}

var unknownFieldRE = regexp.MustCompile(`^(line \d+: )field (\S+) not found in type catalog\.(\w+)$`)

// explainYAML rewrites the decoder's unknown-field errors to name the
// keys that section knows, so a typo shows its fix.
func explainYAML(err error, data []byte) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		if !strings.HasPrefix(err.Error(), "yaml: ") {
			// A section's own check (an unknown plugin, a value out of
			// range): the YAML is fine, the error names line and field.
			return err
		}
		return fmt.Errorf("invalid YAML: %w", syntaxLine(err, data))
	}
	msgs := make([]string, len(te.Errors))
	unknownOnly := true
	for i, m := range te.Errors {
		msgs[i] = m
		sub := unknownFieldRE.FindStringSubmatch(m)
		if sub == nil {
			unknownOnly = false
			continue
		}
		if t, ok := sections[sub[3]]; ok {
			msgs[i] = fmt.Sprintf("%sunknown key %q in %s (known: %s)", sub[1], sub[2], sectionNames[sub[3]], strings.Join(yamlKeys(t), ", "))
		}
	}
	what := "invalid YAML" // a value of the wrong type
	if unknownOnly {
		what = "unknown keys" // the YAML is fine, a key is misspelt
	}
	return fmt.Errorf("%s:\n  %s", what, strings.Join(msgs, "\n  "))
}

var syntaxLineRE = regexp.MustCompile(`^yaml: line (\d+): `)

// syntaxLine corrects the line of a YAML syntax error: the parser names
// the line its block started on (line 1 for a bad indent on line 3). The
// first line whose prefix of the file no longer parses is where the
// problem is.
func syntaxLine(err error, data []byte) error {
	m := syntaxLineRE.FindStringSubmatch(err.Error())
	lines := bytes.Split(data, []byte("\n"))
	if m == nil || len(lines) > 5000 {
		return err
	}
	for n := 1; n <= len(lines); n++ {
		var v any
		if yaml.Unmarshal(bytes.Join(lines[:n], []byte("\n")), &v) == nil {
			continue
		}
		if strconv.Itoa(n) == m[1] {
			return err
		}
		return fmt.Errorf("line %d: %s, at %q (check its indentation against the lines above)", n, strings.TrimPrefix(err.Error(), m[0]), strings.TrimSpace(string(lines[n-1])))
	}
	return err
}

func yamlKeys(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if k, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); k != "" && k != "-" {
			out = append(out, k)
		}
	}
	return out
}
