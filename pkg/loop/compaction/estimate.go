package compaction

import (
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Token estimation. Raw estimates are the cheap
// heuristic — UTF-8 bytes / 4 + 8 per entry, flat costs for images and
// files — and calibrated estimates multiply the raw view by the run's
// ratio, which tracks the provider's real input-token counts.

// fixed overhead of a tool's function-schema JSON:
// {"type":"function","function":{"name":"","description":"","parameters":}}
const toolSchemaOverhead = len(`{"type":"function","function":{"name":"","description":"","parameters":}}`)

// EstimateEntry returns the raw heuristic token estimate of one entry:
// text bytes / 4 + 8, where the text is an input's content, an assistant
// text or reasoning, a call's name + arguments or a result's output; part
// lists cost 8 + Σ text bytes / 4 + imageTokens per image + 2000 per file
// (results with parts are priced by their parts).
func EstimateEntry(e *loop.Entry, imageTokens int) int {
	switch e.Kind {
	case loop.KindInput:
		if len(e.Parts) > 0 {
			return estimateParts(e.Parts, imageTokens)
		}
		return len(e.Content)/4 + 8
	case loop.KindAssistantText, loop.KindReasoning:
		return len(e.Text)/4 + 8
	case loop.KindToolCall:
		return (len(e.Name)+len(e.Arguments))/4 + 8
	case loop.KindToolResult:
		if len(e.Parts) > 0 {
			return estimateParts(e.Parts, imageTokens)
		}
		return len(e.Output)/4 + 8
	}
	return 8
}

func estimateParts(parts []loop.Part, imageTokens int) int {
	n := 8
	for i := range parts {
		switch parts[i].Type {
		case loop.PartImage:
			n += imageTokens
		case loop.PartFile:
			n += FileTokens
		default:
			n += len(parts[i].Text) / 4
		}
	}
	return n
}

// EstimateTools returns the raw estimate of the tool schemas riding in a
// request: each schema's function JSON / 4 + 8.
func EstimateTools(tools []loop.ToolSchema) int {
	n := 0
	for i := range tools {
		t := &tools[i]
		n += (toolSchemaOverhead+len(t.Name)+len(t.Description)+len(t.Parameters))/4 + 8
	}
	return n
}

// estimator prices views for one Compact call.
type estimator struct {
	image    int
	ratio    float64
	provider loop.TokenEstimator // nil: heuristic only
	tools    []loop.ToolSchema
	toolsRaw int
}

func (e *estimator) entry(x *loop.Entry) int { return EstimateEntry(x, e.image) }

// raw returns the raw estimate of entries (no tools).
func (e *estimator) raw(entries []loop.Entry) int {
	n := 0
	for i := range entries {
		n += EstimateEntry(&entries[i], e.image)
	}
	return n
}

// view returns the raw estimate of a whole request: entries plus tools, by
// the provider's own counter when it has one (the heuristic when it fails).
func (e *estimator) view(entries []loop.Entry) int {
	if e.provider != nil {
		if n, err := e.provider.EstimateTokens(entries, e.tools); err == nil && n > 0 {
			return n
		}
	}
	return e.raw(entries) + e.toolsRaw
}

// calibrated applies the ratio to a raw estimate.
func (e *estimator) calibrated(raw int) int { return int(float64(raw) * e.ratio) }
