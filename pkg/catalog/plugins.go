package catalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.yaml.in/yaml/v3"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/plugins/memory"
	"github.com/lovia-fleet/lovia/pkg/plugins/skills"
	"github.com/lovia-fleet/lovia/pkg/plugins/subagents"
	"github.com/lovia-fleet/lovia/pkg/plugins/todo"
)

// PluginStores are the fleet's JetStream stores the fleet-native plugins
// keep their state in.
type PluginStores struct {
	// JetStream reaches the stores; nil: none (listing-only processes,
	// tests of the file's syntax).
	JetStream jetstream.JetStream
	// Names are the fleet's subject and bucket names (the zero value: the
	// default prefix).
	Names bus.Names
	// Replicas is the number of copies of a bucket a plugin creates (the
	// memory bucket, at its first write); below 1: 1.
	Replicas int
	// Logger is the plugins' logger (default slog.Default()).
	Logger *slog.Logger
}

// PluginsSpec is an agent's `plugins:` section: one key per plugin, its
// value the plugin's settings (`{}` for the defaults). Unknown plugins and
// unknown settings are errors naming the known ones.
//
//	plugins:
//	  todo: {}
type PluginsSpec struct {
	// Todo enables the Todo plugin (pkg/plugins/todo). It has no settings.
	Todo *TodoSpec `yaml:"todo" json:"todo,omitempty"`
	// Skills enables the Skills plugin (pkg/plugins/skills).
	Skills *SkillsSpec `yaml:"skills" json:"skills,omitempty"`
	// Memory enables the Memory plugin (pkg/plugins/memory).
	Memory *MemorySpec `yaml:"memory" json:"memory,omitempty"`
	// Subagents enables the Subagents plugin (pkg/plugins/subagents).
	Subagents *SubagentsSpec `yaml:"subagents" json:"subagents,omitempty"`
}

// TodoSpec are the Todo plugin's settings (none yet).
type TodoSpec struct{}

// SkillsSpec are the Skills plugin's settings.
type SkillsSpec struct {
	// Dir is a folder of skill folders on each worker; empty: the fleet's
	// object store (`lovia skills push DIR`).
	Dir string `yaml:"dir" json:"dir,omitempty"`
	// MaxChars caps each skill text the model reads (default 20000).
	MaxChars int `yaml:"max_chars" json:"max_chars,omitempty"`
}

// MemorySpec are the Memory plugin's settings.
type MemorySpec struct {
	// Scope is what memories belong to: session (default) or user.
	Scope string `yaml:"scope" json:"scope,omitempty"`
	// UserKey is the run metadata key holding the user id (default
	// user_id), for scope user.
	UserKey string `yaml:"user_key" json:"user_key,omitempty"`
	// MaxNotes caps the notes written into the system prompt (default 20).
	MaxNotes int `yaml:"max_notes" json:"max_notes,omitempty"`
	// DreamEvery makes every n-th completed run of a scope rewrite its
	// notes with the agent's model (default 0: never).
	DreamEvery int `yaml:"dream_every" json:"dream_every,omitempty"`
}

// SubagentsSpec are the Subagents plugin's settings.
type SubagentsSpec struct {
	// Agents are the agents a subagent may run (required).
	Agents []string `yaml:"agents" json:"agents"`
	// MaxWait caps wait_subagents (default 10m).
	MaxWait Duration `yaml:"max_wait" json:"max_wait,omitempty"`
}

// pluginKinds are the settings type of each plugin, for the key checks.
var pluginKinds = map[string]reflect.Type{
	"todo":      reflect.TypeFor[TodoSpec](),
	"skills":    reflect.TypeFor[SkillsSpec](),
	"memory":    reflect.TypeFor[MemorySpec](),
	"subagents": reflect.TypeFor[SubagentsSpec](),
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
func buildPlugins(a *loop.Agent, ps *PluginsSpec, opts Options) error {
	if ps == nil {
		return nil
	}
	if ps.Todo != nil {
		a.Plugins = append(a.Plugins, todo.New())
	}
	if s := ps.Skills; s != nil {
		if s.MaxChars < 0 {
			return fmt.Errorf("plugins.skills.max_chars %d is negative", s.MaxChars)
		}
		var src skills.Source
		switch {
		case s.Dir != "":
			src = skills.Dir(s.Dir)
		case opts.Plugins.JetStream != nil:
			src = skills.NewObjectStore(opts.Plugins.JetStream, opts.Plugins.Names.SkillsBucket())
		default:
			src = noStore{what: "the skills object store"}
		}
		p, err := skills.New(skills.Config{Source: src, MaxChars: s.MaxChars, Logger: opts.Plugins.Logger})
		if err != nil {
			return err
		}
		skills.Attach(a, p)
	}
	if m := ps.Memory; m != nil {
		if m.Scope != "" && m.Scope != string(memory.BySession) && m.Scope != string(memory.ByUser) {
			return fmt.Errorf("plugins.memory.scope %q: use session or user", m.Scope)
		}
		if m.MaxNotes < 0 {
			return fmt.Errorf("plugins.memory.max_notes %d is negative", m.MaxNotes)
		}
		if m.DreamEvery < 0 {
			return fmt.Errorf("plugins.memory.dream_every %d is negative (0, the default, never dreams)", m.DreamEvery)
		}
		var st memory.Store = noStore{what: "the memory bucket"}
		if js := opts.Plugins.JetStream; js != nil {
			st = memory.NewKV(js, opts.Plugins.Names.MemoryBucket(), opts.Plugins.Replicas)
		}
		p, err := memory.New(memory.Config{Store: st, Scope: memory.ScopeKind(m.Scope), UserKey: m.UserKey, MaxNotes: m.MaxNotes, DreamEvery: m.DreamEvery, Logger: opts.Plugins.Logger})
		if err != nil {
			return err
		}
		memory.Attach(a, p)
	}
	if sa := ps.Subagents; sa != nil {
		if len(sa.Agents) == 0 {
			return errors.New("plugins.subagents.agents must name the agents a subagent may run")
		}
		var fleet subagents.Fleet = noStore{what: "the fleet"}
		if js := opts.Plugins.JetStream; js != nil {
			c, err := client.New(js.Conn(), client.Options{Prefix: opts.Plugins.Names.Prefix()})
			if err != nil {
				return err
			}
			fleet = c
		}
		p, err := subagents.New(subagents.Config{Fleet: fleet, Agents: sa.Agents, MaxWait: time.Duration(sa.MaxWait), Logger: opts.Plugins.Logger})
		if err != nil {
			return err
		}
		a.Plugins = append(a.Plugins, p)
	}
	return nil
}

// noStore is the source of a plugin built without the fleet's stores.
type noStore struct{ what string }

func (n noStore) err() error {
	return fmt.Errorf("%s is not reachable from this process: build the catalog with Options.Plugins (lovia worker and lovia dev do)", n.what)
}

func (n noStore) Folders(context.Context) ([]string, error)       { return nil, n.err() }
func (n noStore) Files(context.Context, string) ([]string, error) { return nil, n.err() }
func (n noStore) ReadFile(context.Context, string, string, int) ([]byte, bool, error) {
	return nil, false, n.err()
}
func (n noStore) Put(context.Context, string, memory.Record) error    { return n.err() }
func (n noStore) Create(context.Context, string, memory.Record) error { return n.err() }
func (n noStore) Delete(context.Context, string, memory.Kind, string) error {
	return n.err()
}
func (n noStore) List(context.Context, string, memory.Kind) ([]memory.Record, error) {
	return nil, n.err()
}
func (n noStore) Submit(context.Context, *bus.RunRequest) (*bus.SubmitReply, error) {
	return nil, n.err()
}
func (n noStore) Inject(context.Context, string, string, ...bus.InjectOption) (string, error) {
	return "", n.err()
}
func (n noStore) Cancel(context.Context, string, string) (*bus.CancelReply, error) {
	return nil, n.err()
}
func (n noStore) Tail(context.Context, string, ...bus.TailOption) (*bus.Tail, error) {
	return nil, n.err()
}
