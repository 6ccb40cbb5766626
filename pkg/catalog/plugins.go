package catalog

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/plugins/todo"
)

// PluginsSpec is an agent's `plugins:` section: one key per plugin, its
// value the plugin's settings (`{}` for the defaults). Unknown plugins and
// unknown settings are errors naming the known ones.
//
//	plugins:
//	  todo: {}
type PluginsSpec struct {
	// Todo enables the Todo plugin (pkg/plugins/todo). It has no settings.
	Todo *TodoSpec `yaml:"todo" json:"todo,omitempty"`
}

// TodoSpec are the Todo plugin's settings (none yet).
type TodoSpec struct{}

// pluginKinds are the settings type of each plugin, for the key checks.
var pluginKinds = map[string]reflect.Type{
	"todo": reflect.TypeFor[TodoSpec](),
}

// UnmarshalYAML decodes the section after checking every plugin name and
// setting: yaml.v3 does not check the keys of a custom unmarshaler's node.
func (p *PluginsSpec) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: plugins must be a map of plugin name to its settings, e.g. `plugins: {todo: {}}`", n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		t, ok := pluginKinds[k.Value]
		if !ok {
			return fmt.Errorf("line %d: unknown plugin %q (known: %s)", k.Line, k.Value, strings.Join(knownPlugins(), ", "))
		}
		switch {
		case v.Kind == yaml.ScalarNode && v.Tag == "!!null":
			return fmt.Errorf("line %d: plugin %q has no settings: write `%s: {}` for the defaults", k.Line, k.Value, k.Value)
		case v.Kind != yaml.MappingNode:
			return fmt.Errorf("line %d: plugin %q: its settings must be a map (`%s: {}` for the defaults)", v.Line, k.Value, k.Value)
		}
		known := yamlKeys(t)
		for j := 0; j+1 < len(v.Content); j += 2 {
			sk := v.Content[j]
			if !contains(known, sk.Value) {
				list := "none"
				if len(known) > 0 {
					list = strings.Join(known, ", ")
				}
				return fmt.Errorf("line %d: unknown setting %q of plugin %q (known: %s)", sk.Line, sk.Value, k.Value, list)
			}
		}
	}
	type plain PluginsSpec
	return n.Decode((*plain)(p))
}

func knownPlugins() []string {
	out := make([]string, 0, len(pluginKinds))
	for k := range pluginKinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// buildPlugins adds the plugins of an agent's `plugins:` section to a.
func buildPlugins(a *loop.Agent, ps *PluginsSpec, _ Options) error {
	if ps == nil {
		return nil
	}
	if ps.Todo != nil {
		a.Plugins = append(a.Plugins, todo.New())
	}
	return nil
}
