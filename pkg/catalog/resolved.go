package catalog

import "github.com/lovia-fleet/lovia/pkg/loop"

// ToolSchemas returns the schemas of the tools a run of the named agent
// would get now, in order: its built-in tools, then its MCP and
// tool-service tools as their servers and services last listed them
// (globs expanded). Handoffs are not included (Info lists them). Nil for
// an unknown agent.
func (c *Catalog) ToolSchemas(agent string) []loop.ToolSchema {
	a, ok := c.agents[agent]
	if !ok {
		return nil
	}
	var out []loop.ToolSchema
	for _, t := range a.Tools {
		out = append(out, t.Schema())
	}
	for _, p := range a.Plugins {
		if pt, ok := p.(loop.PluginTools); ok {
			for _, t := range pt.Tools() {
				out = append(out, t.Schema())
			}
		}
	}
	return out
}
