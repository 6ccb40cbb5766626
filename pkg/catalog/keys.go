package catalog

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
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
func explainYAML(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return fmt.Errorf("invalid YAML: %w", err)
	}
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		msgs[i] = m
		sub := unknownFieldRE.FindStringSubmatch(m)
		if sub == nil {
			continue
		}
		if t, ok := sections[sub[3]]; ok {
			msgs[i] = fmt.Sprintf("%sunknown key %q in %s (known: %s)", sub[1], sub[2], sectionNames[sub[3]], strings.Join(yamlKeys(t), ", "))
		}
	}
	return fmt.Errorf("invalid YAML:\n  %s", strings.Join(msgs, "\n  "))
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
