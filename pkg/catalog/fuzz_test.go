package catalog

import (
	"testing"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/tools"
)

// Any agents file is an agents catalog or an error, never a panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte(file))
	f.Add([]byte(mcpFile))
	f.Add([]byte("mcp_servers: {gh: {url: 'https://x/${T}', headers: {A: '${B}'}}}\nagents: [{name: a, model: scripted, tools: ['gh__*', 'svc__x'], approval: ['gh__c*'], script: [{text: x}]}]\n"))
	f.Add([]byte("agents:\n  - {name: a, model: scripted, script: [{calls: [{name: e}], raw_call: {name: e, arguments: '{'}}]}\n"))
	f.Add([]byte("agents:\n  - {name: a, model: scripted, settings: {temperature: 1, stop: [x], provider_options: {k: null}}, retry: off, tool_defaults: {timeout: 1s}, compaction: {compact_at: 90%, stages: [clear]}, as_tools: [b, {agent: b}], instructions_file: x, script: [{text: x}]}\n  - {name: b, model: scripted, compaction: off, retry: {attempts: 2}, as_tools: [a], script: [{text: y}]}\n"))
	ts, err := tools.Builtin(tools.Config{Workspace: f.TempDir()})
	if err != nil {
		f.Fatal(err)
	}
	o := Options{Tools: ts, Registry: &loop.Registry{}, MCPUnresolved: true}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, o)
		if err == nil {
			for _, n := range c.Names() {
				_ = c.ToolSchemas(n)
			}
			_ = c.Infos()
		}
	})
}
