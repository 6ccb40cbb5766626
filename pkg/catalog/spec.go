package catalog

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// File is the agents file.
type File struct {
	// MCPServers are MCP servers by name whose tools every agent may
	// select in its `tools:`.
	MCPServers map[string]MCPServer `yaml:"mcp_servers" json:"mcp_servers,omitempty"`
	Agents     []Spec               `yaml:"agents" json:"agents"`
}

// Spec is one agent of the agents file.
type Spec struct {
	Name         string `yaml:"name" json:"name"`
	Instructions string `yaml:"instructions" json:"instructions,omitempty"`
	// InstructionsFile names a file holding the instructions, relative to
	// the agents file's folder. [ReadFile] reads it into Instructions (and
	// clears it), so the text travels with the spec (to the registry);
	// [Build] refuses a spec whose file was not read.
	InstructionsFile string         `yaml:"instructions_file" json:"instructions_file,omitempty"`
	Model            string         `yaml:"model" json:"model"`
	Tools            []string       `yaml:"tools" json:"tools,omitempty"`
	Handoffs         []string       `yaml:"handoffs" json:"handoffs,omitempty"`
	Approval         []string       `yaml:"approval" json:"approval,omitempty"`
	OutputSchema     map[string]any `yaml:"output_schema" json:"output_schema,omitempty"`
	MaxTurns         int            `yaml:"max_turns" json:"max_turns,omitempty"`
	ApprovalTimeout  Duration       `yaml:"approval_timeout" json:"approval_timeout,omitempty"`
	Script           []ScriptStep   `yaml:"script" json:"script,omitempty"`
	// MCPServers are MCP servers only this agent may select tools of.
	MCPServers map[string]MCPServer `yaml:"mcp_servers" json:"mcp_servers,omitempty"`
	// Plugins are the plugins the agent runs with, by name (plugins.go).
	Plugins *PluginsSpec `yaml:"plugins" json:"plugins,omitempty"`
	// HTTP bounds the agent's http_request and read_page (http.go).
	HTTP *HTTPSpec `yaml:"http" json:"http,omitempty"`
	// Settings are the agent's model settings (settings.go).
	Settings *SettingsSpec `yaml:"settings" json:"settings,omitempty"`
	// Retry is the agent's provider retry policy (settings.go).
	Retry *RetrySpec `yaml:"retry" json:"retry,omitempty"`
	// ToolDefaults apply to the agent's tools that set none (settings.go).
	ToolDefaults *ToolDefaultsSpec `yaml:"tool_defaults" json:"tool_defaults,omitempty"`
	// Compaction tunes or switches off the agent's context compaction
	// (compaction.go).
	Compaction *CompactionSpec `yaml:"compaction" json:"compaction,omitempty"`
	// AsTools are agents this one may ask, each as an ask_<agent> tool
	// (astools.go).
	AsTools []AsToolSpec `yaml:"as_tools" json:"as_tools,omitempty"`

	// lines are the lines of the spec's keys in the agents file ("": the
	// agent's own), when it was decoded from YAML.
	lines map[string]int
}

// MCPServer declares an MCP server: a stdio server (command, args, env,
// cwd) or a streamable HTTP server (url, headers). Values of env, headers
// and url may refer to the worker's environment as ${NAME}. Its tools are
// named <server>__<tool>.
type MCPServer struct {
	Command string            `yaml:"command" json:"command,omitempty"`
	Args    []string          `yaml:"args" json:"args,omitempty"`
	Env     map[string]string `yaml:"env" json:"env,omitempty"`
	Cwd     string            `yaml:"cwd" json:"cwd,omitempty"`
	URL     string            `yaml:"url" json:"url,omitempty"`
	Headers map[string]string `yaml:"headers" json:"headers,omitempty"`
}

// ScriptStep is one model call of a scripted agent.
type ScriptStep struct {
	Call      *ScriptCall  `yaml:"call" json:"call,omitempty"`
	Calls     []ScriptCall `yaml:"calls" json:"calls,omitempty"`
	RawCall   *RawCall     `yaml:"raw_call" json:"raw_call,omitempty"`
	Text      string       `yaml:"text" json:"text,omitempty"`
	Reasoning string       `yaml:"reasoning" json:"reasoning,omitempty"`
	DelayMs   int          `yaml:"delay_ms" json:"delay_ms,omitempty"`
	Finish    string       `yaml:"finish" json:"finish,omitempty"`
}

// ScriptCall is a scripted tool call with JSON-encodable arguments. Its
// tool must be one the agent has (Build refuses the file otherwise).
type ScriptCall struct {
	Name string         `yaml:"name" json:"name"`
	Args map[string]any `yaml:"args" json:"args,omitempty"`
	ID   string         `yaml:"id" json:"id,omitempty"`
}

// RawCall is a scripted tool call with literal argument text. Its name is
// not checked against the agent's tools: it plays a model that calls what
// it should not, or a tool that Go code gives the agent after Build.
type RawCall struct {
	Name      string `yaml:"name" json:"name"`
	Arguments string `yaml:"arguments" json:"arguments"`
	ID        string `yaml:"id" json:"id,omitempty"`
}

// Duration is a time.Duration written as "10m", "30s" in YAML.
type Duration time.Duration

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return fmt.Errorf("line %d: duration must be a string like 10m or 30s", n.Line)
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: %q is not a duration like 10m or 30s", n.Line, s)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }
