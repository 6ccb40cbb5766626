package openai

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// request maps a model request onto Chat Completions parameters plus the
// options that carry what the SDK's types do not (provider options).
func (p *Provider) request(req *loop.ModelRequest) (oai.ChatCompletionNewParams, []option.RequestOption, error) {
	params := oai.ChatCompletionNewParams{
		Model:    shared.ChatModel(p.cfg.Model),
		Messages: p.messages(req.Entries),
	}
	if *p.cfg.StreamUsage {
		params.StreamOptions.IncludeUsage = oai.Bool(true)
	}
	for _, ts := range req.Tools {
		fn := shared.FunctionDefinitionParam{Name: ts.Name}
		if ts.Description != "" {
			fn.Description = oai.String(ts.Description)
		}
		schema, err := objectSchema(ts.Parameters)
		if err != nil {
			return params, nil, fmt.Errorf("tool %q parameters: %w", ts.Name, err)
		}
		fn.Parameters = schema
		if ts.Strict {
			fn.Strict = oai.Bool(true)
		}
		params.Tools = append(params.Tools, oai.ChatCompletionToolUnionParam{OfFunction: &oai.ChatCompletionFunctionToolParam{Function: fn}})
	}
	if rf := req.ResponseFormat; rf != nil && *p.cfg.NativeJSONSchema {
		if !json.Valid(rf.Schema) {
			return params, nil, fmt.Errorf("response format %q: schema is not valid JSON", rf.Name)
		}
		name := rf.Name
		if name == "" {
			name = "output"
		}
		params.ResponseFormat.OfJSONSchema = &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
				Name:   name,
				Strict: oai.Bool(rf.Strict),
				Schema: json.RawMessage(rf.Schema),
			},
		}
	}
	s := req.Settings
	if s.Temperature != nil {
		params.Temperature = oai.Float(*s.Temperature)
	}
	if s.TopP != nil {
		params.TopP = oai.Float(*s.TopP)
	}
	if s.MaxTokens > 0 {
		if p.cfg.MaxTokensField == MaxCompletionTokens {
			params.MaxCompletionTokens = oai.Int(int64(s.MaxTokens))
		} else {
			params.MaxTokens = oai.Int(int64(s.MaxTokens))
		}
	}
	if len(s.Stop) > 0 {
		params.Stop.OfStringArray = s.Stop
	}
	if s.ParallelToolCalls != nil && len(req.Tools) > 0 {
		params.ParallelToolCalls = oai.Bool(*s.ParallelToolCalls)
	}
	opts, err := providerOptions(s.ProviderOptions[Name])
	return params, opts, err
}

// providerOptions sets each key of ModelSettings.ProviderOptions["openai"]
// on the request body verbatim; a nil value deletes the key, which strips a
// default of this adapter (e.g. {"stream_options": nil}).
func providerOptions(po map[string]any) ([]option.RequestOption, error) {
	keys := make([]string, 0, len(po))
	for k := range po {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	opts := make([]option.RequestOption, 0, len(keys))
	for _, k := range keys {
		if k == "" || strings.ContainsAny(k, ".*?|#@") {
			return nil, fmt.Errorf("provider option %q: keys are top-level request fields", k)
		}
		if po[k] == nil {
			opts = append(opts, option.WithJSONDel(k))
		} else {
			opts = append(opts, option.WithJSONSet(k, po[k]))
		}
	}
	return opts, nil
}

// objectSchema decodes a tool's JSON Schema, keeping nested values as raw
// JSON so they reach the wire unchanged. An empty schema is an object with
// no properties.
func objectSchema(raw json.RawMessage) (shared.FunctionParameters, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return shared.FunctionParameters{"type": "object", "properties": map[string]any{}}, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	out := make(shared.FunctionParameters, len(fields))
	for k, v := range fields {
		out[k] = v
	}
	return out, nil
}

// messages maps the view onto chat messages. Consecutive reasoning, text
// and tool-call entries fold into one assistant message; each tool result
// becomes a tool message paired by call id; system inputs stay in place.
func (p *Provider) messages(entries []loop.Entry) []oai.ChatCompletionMessageParamUnion {
	var (
		out  []oai.ChatCompletionMessageParamUnion
		asst assistant
	)
	flush := func() {
		if m, ok := asst.message(); ok {
			out = append(out, m)
		}
		asst = assistant{}
	}
	for i := range entries {
		e := &entries[i]
		switch e.Kind {
		case loop.KindInput:
			flush()
			if e.Role == loop.RoleSystem {
				out = append(out, oai.SystemMessage(e.ContentText()))
			} else {
				out = append(out, p.userMessage(e))
			}
		case loop.KindAssistantText:
			asst.text.WriteString(e.Text)
			asst.hasText = true
		case loop.KindReasoning:
			// Only reasoning this adapter wrote is replayed, and only to
			// hosts that expect it back.
			if *p.cfg.ReplayReasoning && e.Provider == Name && e.Text != "" {
				asst.reasoning.WriteString(e.Text)
			}
		case loop.KindToolCall:
			args := e.Arguments
			if strings.TrimSpace(args) == "" {
				args = "{}"
			}
			asst.calls = append(asst.calls, oai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
					ID:       e.CallID,
					Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: e.Name, Arguments: args},
				},
			})
		case loop.KindToolResult:
			flush()
			out = append(out, oai.ToolMessage(e.Output, e.CallID))
		}
	}
	flush()
	return out
}

// assistant collects the entries of one assistant message.
type assistant struct {
	text      strings.Builder
	hasText   bool
	reasoning strings.Builder
	calls     []oai.ChatCompletionMessageToolCallUnionParam
}

func (a *assistant) message() (oai.ChatCompletionMessageParamUnion, bool) {
	if !a.hasText && len(a.calls) == 0 && a.reasoning.Len() == 0 {
		return oai.ChatCompletionMessageParamUnion{}, false
	}
	var m oai.ChatCompletionAssistantMessageParam
	if a.text.Len() > 0 || len(a.calls) == 0 {
		m.Content.OfString = oai.String(a.text.String())
	}
	m.ToolCalls = a.calls
	if a.reasoning.Len() > 0 {
		m.SetExtraFields(map[string]any{"reasoning_content": a.reasoning.String()})
	}
	return oai.ChatCompletionMessageParamUnion{OfAssistant: &m}, true
}

// userMessage maps a user input: plain content stays a string; parts become
// text, image_url and (on the official host) file parts, and anything the
// endpoint cannot take is sent as its text projection.
func (p *Provider) userMessage(e *loop.Entry) oai.ChatCompletionMessageParamUnion {
	if len(e.Parts) == 0 {
		return oai.UserMessage(e.Content)
	}
	parts := make([]oai.ChatCompletionContentPartUnionParam, 0, len(e.Parts))
	for _, part := range e.Parts {
		switch {
		case part.Type == loop.PartText:
			parts = append(parts, oai.TextContentPart(part.Text))
		case part.Type == loop.PartImage && *p.cfg.Vision:
			img := oai.ChatCompletionContentPartImageImageURLParam{URL: dataURL(part), Detail: part.Detail}
			parts = append(parts, oai.ImageContentPart(img))
		case part.Type == loop.PartFile && part.Data != "" && isOfficial(p.cfg.BaseURL):
			f := oai.ChatCompletionContentPartFileFileParam{FileData: oai.String(dataURL(part))}
			if part.Filename != "" {
				f.Filename = oai.String(part.Filename)
			}
			parts = append(parts, oai.FileContentPart(f))
		default:
			parts = append(parts, oai.TextContentPart(loop.PartsText([]loop.Part{part})))
		}
	}
	return oai.UserMessage(parts)
}

// dataURL is a part's URL, or its inline data as a data: URL.
func dataURL(part loop.Part) string {
	if part.URL != "" {
		return part.URL
	}
	return "data:" + part.MimeType + ";base64," + part.Data
}
