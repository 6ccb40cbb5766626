package anthropic

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// request maps a model request onto Messages parameters plus the options
// that carry what the SDK's types do not (sampling knobs, provider options).
func (p *Provider) request(req *loop.ModelRequest) (sdk.MessageNewParams, []option.RequestOption, error) {
	s := req.Settings
	params := sdk.MessageNewParams{
		Model:     sdk.Model(p.cfg.Model),
		MaxTokens: int64(p.cfg.MaxTokens),
	}
	if s.MaxTokens > 0 {
		params.MaxTokens = int64(s.MaxTokens)
	}
	params.System, params.Messages = p.messages(req.Entries)

	native := *p.cfg.NativeJSONSchema
	for _, ts := range req.Tools {
		schema, err := inputSchema(ts.Parameters)
		if err != nil {
			return params, nil, fmt.Errorf("tool %q parameters: %w", ts.Name, err)
		}
		tool := sdk.ToolParam{Name: ts.Name, InputSchema: schema}
		if ts.Description != "" {
			tool.Description = sdk.String(ts.Description)
		}
		if ts.Strict && native {
			tool.Strict = sdk.Bool(true)
		}
		params.Tools = append(params.Tools, sdk.ToolUnionParam{OfTool: &tool})
	}
	if s.ParallelToolCalls != nil && !*s.ParallelToolCalls && len(req.Tools) > 0 {
		params.ToolChoice.OfAuto = &sdk.ToolChoiceAutoParam{DisableParallelToolUse: sdk.Bool(true)}
	}
	if rf := req.ResponseFormat; rf != nil && native {
		schema, err := rawObject(rf.Schema)
		if err != nil {
			return params, nil, fmt.Errorf("response format %q: %w", rf.Name, err)
		}
		params.OutputConfig.Format = sdk.JSONOutputFormatParam{Schema: schema}
	}
	if len(s.Stop) > 0 {
		params.StopSequences = s.Stop
	}

	var opts []option.RequestOption
	thinking := p.cfg.ThinkingBudget > 0 || p.cfg.AdaptiveThinking
	switch {
	case p.cfg.ThinkingBudget > 0:
		params.Thinking = sdk.ThinkingConfigParamOfEnabled(int64(p.cfg.ThinkingBudget))
		if params.MaxTokens <= int64(p.cfg.ThinkingBudget) {
			params.MaxTokens = int64(p.cfg.ThinkingBudget + MinThinkingBudget)
		}
	case p.cfg.AdaptiveThinking:
		params.Thinking.OfAdaptive = &sdk.ThinkingConfigAdaptiveParam{}
	}
	// Sampling knobs are not fields of this SDK's params; they are set on
	// the body. Thinking requires the default temperature.
	if s.Temperature != nil && !thinking {
		opts = append(opts, option.WithJSONSet("temperature", *s.Temperature))
	}
	if s.TopP != nil {
		opts = append(opts, option.WithJSONSet("top_p", *s.TopP))
	}
	if p.cfg.PromptCaching {
		p.cacheBreakpoints(&params)
	}
	po, err := providerOptions(s.ProviderOptions[Name])
	if err != nil {
		return params, nil, err
	}
	return params, append(opts, po...), nil
}

// providerOptions sets each key of ModelSettings.ProviderOptions["anthropic"]
// on the request body verbatim; a nil value deletes the key.
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

// rawObject decodes a JSON object keeping its values as raw JSON.
func rawObject(raw json.RawMessage) (map[string]any, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	if fields == nil {
		return nil, fmt.Errorf("schema is not a JSON object")
	}
	out := make(map[string]any, len(fields))
	for k, v := range fields {
		out[k] = v
	}
	return out, nil
}

// inputSchema maps a tool's JSON Schema onto input_schema ("type" is always
// "object"; every other keyword is carried verbatim).
func inputSchema(raw json.RawMessage) (sdk.ToolInputSchemaParam, error) {
	var out sdk.ToolInputSchemaParam
	if len(raw) == 0 || string(raw) == "null" {
		out.Properties = map[string]any{}
		return out, nil
	}
	fields, err := rawObject(raw)
	if err != nil {
		return out, err
	}
	if props, ok := fields["properties"]; ok {
		out.Properties = props
	} else {
		out.Properties = map[string]any{}
	}
	if req, ok := fields["required"]; ok {
		if err := json.Unmarshal(req.(json.RawMessage), &out.Required); err != nil {
			return out, fmt.Errorf("required: %w", err)
		}
	}
	delete(fields, "type")
	delete(fields, "properties")
	delete(fields, "required")
	if len(fields) > 0 {
		out.ExtraFields = fields
	}
	return out, nil
}

// messages maps the view: system inputs become the system prompt (in
// order); user inputs and tool results fold into user messages (tool
// results first, paired by call id); consecutive reasoning, text and tool
// calls fold into one assistant message. Reasoning is replayed only when
// this adapter wrote it: thinking with its signature, redacted thinking
// with its data.
func (p *Provider) messages(entries []loop.Entry) ([]sdk.TextBlockParam, []sdk.MessageParam) {
	var (
		system []sdk.TextBlockParam
		out    []sdk.MessageParam
		role   string
		blocks []sdk.ContentBlockParamUnion
	)
	flush := func() {
		if len(blocks) > 0 {
			if role == "user" {
				out = append(out, sdk.NewUserMessage(blocks...))
			} else {
				out = append(out, sdk.NewAssistantMessage(blocks...))
			}
		}
		blocks = nil
	}
	add := func(r string, b ...sdk.ContentBlockParamUnion) {
		if r != role {
			flush()
			role = r
		}
		blocks = append(blocks, b...)
	}
	for i := range entries {
		e := &entries[i]
		switch e.Kind {
		case loop.KindInput:
			if e.Role == loop.RoleSystem {
				if text := e.ContentText(); text != "" {
					system = append(system, sdk.TextBlockParam{Text: text})
				}
				continue
			}
			if b := userBlocks(e); len(b) > 0 {
				add("user", b...)
			}
		case loop.KindToolResult:
			add("user", toolResult(e))
		case loop.KindAssistantText:
			if e.Text != "" {
				add("assistant", sdk.NewTextBlock(e.Text))
			}
		case loop.KindReasoning:
			switch {
			case e.Provider != Name:
			case e.Redacted != "":
				add("assistant", sdk.NewRedactedThinkingBlock(e.Redacted))
			case e.Signature != "":
				add("assistant", sdk.NewThinkingBlock(e.Signature, e.Text))
			}
		case loop.KindToolCall:
			add("assistant", sdk.NewToolUseBlock(e.CallID, toolInput(e.Arguments), e.Name))
		}
	}
	flush()
	return system, out
}

// toolInput is a call's arguments as a JSON object: the raw text when it is
// one, {} when empty, else {"_raw": text} (the API requires an object).
func toolInput(args string) json.RawMessage {
	t := strings.TrimSpace(args)
	if t == "" {
		return json.RawMessage("{}")
	}
	var probe map[string]json.RawMessage
	if strings.HasPrefix(t, "{") && json.Unmarshal([]byte(t), &probe) == nil {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(map[string]string{"_raw": args})
	return b
}

func toolResult(e *loop.Entry) sdk.ContentBlockParamUnion {
	r := sdk.ToolResultBlockParam{ToolUseID: e.CallID}
	if e.IsError {
		r.IsError = sdk.Bool(true)
	}
	if hasMedia(e.Parts) {
		for _, b := range partBlocks(e.Parts) {
			switch {
			case b.OfText != nil:
				r.Content = append(r.Content, sdk.ToolResultBlockParamContentUnion{OfText: b.OfText})
			case b.OfImage != nil:
				r.Content = append(r.Content, sdk.ToolResultBlockParamContentUnion{OfImage: b.OfImage})
			case b.OfDocument != nil:
				r.Content = append(r.Content, sdk.ToolResultBlockParamContentUnion{OfDocument: b.OfDocument})
			}
		}
	} else if e.Output != "" {
		r.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: e.Output}}}
	}
	return sdk.ContentBlockParamUnion{OfToolResult: &r}
}

func hasMedia(parts []loop.Part) bool {
	for _, p := range parts {
		if p.Type != loop.PartText {
			return true
		}
	}
	return false
}

func userBlocks(e *loop.Entry) []sdk.ContentBlockParamUnion {
	if len(e.Parts) == 0 {
		if e.Content == "" {
			return nil
		}
		return []sdk.ContentBlockParamUnion{sdk.NewTextBlock(e.Content)}
	}
	return partBlocks(e.Parts)
}

// partBlocks maps content parts: text, images (inline or by URL), PDFs and
// plain-text files as documents; anything else as its text projection.
func partBlocks(parts []loop.Part) []sdk.ContentBlockParamUnion {
	out := make([]sdk.ContentBlockParamUnion, 0, len(parts))
	for _, part := range parts {
		switch {
		case part.Type == loop.PartText:
			if part.Text != "" {
				out = append(out, sdk.NewTextBlock(part.Text))
			}
		case part.Type == loop.PartImage && part.URL != "":
			out = append(out, sdk.NewImageBlock(sdk.URLImageSourceParam{URL: part.URL}))
		case part.Type == loop.PartImage && part.Data != "":
			out = append(out, sdk.NewImageBlockBase64(part.MimeType, part.Data))
		case part.Type == loop.PartFile && part.MimeType == "application/pdf" && part.Data != "":
			out = append(out, document(sdk.NewDocumentBlock(sdk.Base64PDFSourceParam{Data: part.Data}), part.Filename))
		case part.Type == loop.PartFile && part.MimeType == "application/pdf" && part.URL != "":
			out = append(out, document(sdk.NewDocumentBlock(sdk.URLPDFSourceParam{URL: part.URL}), part.Filename))
		case part.Type == loop.PartFile && part.MimeType == "text/plain" && part.Data != "":
			if text, err := base64.StdEncoding.DecodeString(part.Data); err == nil {
				out = append(out, document(sdk.NewDocumentBlock(sdk.PlainTextSourceParam{Data: string(text)}), part.Filename))
				continue
			}
			fallthrough
		default:
			out = append(out, sdk.NewTextBlock(loop.PartsText([]loop.Part{part})))
		}
	}
	return out
}

func document(b sdk.ContentBlockParamUnion, title string) sdk.ContentBlockParamUnion {
	if title != "" && b.OfDocument != nil {
		b.OfDocument.Title = sdk.String(title)
	}
	return b
}

// cacheBreakpoints marks the last tool, the last system block and the last
// block of the last message (at most three of the four breakpoints the API
// allows).
func (p *Provider) cacheBreakpoints(params *sdk.MessageNewParams) {
	cc := sdk.CacheControlEphemeralParam{TTL: sdk.CacheControlEphemeralTTL(p.cfg.CacheTTL)}
	if n := len(params.Tools); n > 0 && params.Tools[n-1].OfTool != nil {
		params.Tools[n-1].OfTool.CacheControl = cc
	}
	if n := len(params.System); n > 0 {
		params.System[n-1].CacheControl = cc
	}
	if n := len(params.Messages); n > 0 {
		m := params.Messages[n-1]
		var content []sdk.ContentBlockParamUnion
		switch {
		case m.OfUser != nil:
			content = m.OfUser.Content
		case m.OfAssistant != nil:
			content = m.OfAssistant.Content
		}
		if k := len(content); k > 0 {
			b := content[k-1]
			switch {
			case b.OfText != nil:
				b.OfText.CacheControl = cc
			case b.OfToolResult != nil:
				b.OfToolResult.CacheControl = cc
			case b.OfToolUse != nil:
				b.OfToolUse.CacheControl = cc
			case b.OfImage != nil:
				b.OfImage.CacheControl = cc
			case b.OfDocument != nil:
				b.OfDocument.CacheControl = cc
			}
		}
	}
}
