package catalog

import (
	"fmt"
	"sort"
	"strings"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/compaction"
	"github.com/lovia-fleet/lovia/pkg/tools/mcp"
)

// checkScript refuses a scripted agent whose script calls a tool the
// agent does not have, as an unknown tool in `tools:` is refused: every
// run of it would end with the model calling a tool that is not there. A
// raw_call is not checked: it is how a script plays a model that sends
// what it should not.
func checkScript(a *Agent) error {
	if a.Spec.Model != "scripted" {
		return nil
	}
	have := map[string]bool{compaction.RecallToolName: true} // the worker's context policy adds it
	var patterns []string
	for _, t := range a.Agent.Tools {
		have[t.Name] = true
	}
	for _, p := range a.Agent.Plugins {
		if _, remote := p.(*remoteTools); remote {
			continue
		}
		if pt, ok := p.(loop.PluginTools); ok {
			for _, t := range pt.Tools() {
				have[t.Name] = true
			}
		}
	}
	for _, h := range a.Agent.Handoffs {
		name := h.ToolName
		if name == "" {
			name = loop.HandoffToolName(h.Agent.Name)
		}
		have[name] = true
	}
	for _, n := range a.Spec.Tools {
		if strings.Contains(n, mcp.Separator) {
			patterns = append(patterns, n)
		}
	}
	for i, st := range a.Spec.Script {
		var calls []string
		if st.Call != nil {
			calls = append(calls, st.Call.Name)
		}
		for _, c := range st.Calls {
			calls = append(calls, c.Name)
		}
		for _, c := range calls {
			if have[c] || matchesAny(patterns, c) {
				continue
			}
			known := make([]string, 0, len(have))
			for n := range have {
				if n != compaction.RecallToolName {
					known = append(known, n)
				}
			}
			sort.Strings(known)
			known = append(known, patterns...)
			list := "none"
			if len(known) > 0 {
				list = strings.Join(known, ", ")
			}
			return fmt.Errorf("script[%d] calls tool %q, which the agent does not have (its tools: %s): add it to `tools:`, or call one of those", i, c, list)
		}
	}
	return nil
}
