package loop

import (
	"encoding/json"
	"fmt"
	"strings"
)

// EntryKind names a transcript entry's kind on the wire (docs/protocol.md#transcript-entries).
type EntryKind string

// Entry kinds.
const (
	KindInput         EntryKind = "input"
	KindAssistantText EntryKind = "assistant_text"
	KindReasoning     EntryKind = "reasoning"
	KindToolCall      EntryKind = "tool_call"
	KindToolResult    EntryKind = "tool_result"
)

// Role is the author of an input entry.
type Role string

// Input roles.
const (
	RoleSystem Role = "system"
	RoleUser   Role = "user"
)

// Entry is one item of the canonical, append-only transcript. It is a flat
// record discriminated by Kind so that it encodes the same way in JSON and
// msgpack and costs one allocation per slice, not per field. Which fields are
// meaningful depends on Kind:
//
//   - input: Role, Content (or Parts)
//   - assistant_text: Text, ID
//   - reasoning: Text, ID, Provider, Signature, Redacted
//   - tool_call: CallID, Name, Arguments (the raw JSON text the model emitted)
//   - tool_result: CallID, Name, Output, IsError, Raw, Parts
//
// Entries are values: the loop replaces an entry rather than mutating one that
// was already handed out.
type Entry struct {
	Kind      EntryKind       `json:"kind" msgpack:"kind"`
	Role      Role            `json:"role,omitempty" msgpack:"role,omitempty"`
	Content   string          `json:"content,omitempty" msgpack:"content,omitempty"`
	Text      string          `json:"text,omitempty" msgpack:"text,omitempty"`
	ID        string          `json:"id,omitempty" msgpack:"id,omitempty"`
	Provider  string          `json:"provider,omitempty" msgpack:"provider,omitempty"`
	Signature string          `json:"signature,omitempty" msgpack:"signature,omitempty"`
	Redacted  string          `json:"redacted,omitempty" msgpack:"redacted,omitempty"`
	CallID    string          `json:"call_id,omitempty" msgpack:"call_id,omitempty"`
	Name      string          `json:"name,omitempty" msgpack:"name,omitempty"`
	Arguments string          `json:"arguments,omitempty" msgpack:"arguments,omitempty"`
	Output    string          `json:"output,omitempty" msgpack:"output,omitempty"`
	IsError   bool            `json:"is_error,omitempty" msgpack:"is_error,omitempty"`
	Raw       json.RawMessage `json:"raw,omitempty" msgpack:"raw,omitempty"`
	Parts     []Part          `json:"parts,omitempty" msgpack:"parts,omitempty"`
}

// PartType names a content part.
type PartType string

// Content part types.
const (
	PartText  PartType = "text"
	PartImage PartType = "image"
	PartFile  PartType = "file"
)

// Part is one piece of multimodal content: text, an image or a file, given
// either by URL or inline as base64 Data with a MimeType.
type Part struct {
	Type     PartType `json:"type" msgpack:"type"`
	Text     string   `json:"text,omitempty" msgpack:"text,omitempty"`
	URL      string   `json:"url,omitempty" msgpack:"url,omitempty"`
	Data     string   `json:"data,omitempty" msgpack:"data,omitempty"`
	MimeType string   `json:"mime_type,omitempty" msgpack:"mime_type,omitempty"`
	Filename string   `json:"filename,omitempty" msgpack:"filename,omitempty"`
	Detail   string   `json:"detail,omitempty" msgpack:"detail,omitempty"`
}

// UserText returns a user input entry.
func UserText(s string) Entry { return Entry{Kind: KindInput, Role: RoleUser, Content: s} }

// SystemText returns a system input entry.
func SystemText(s string) Entry { return Entry{Kind: KindInput, Role: RoleSystem, Content: s} }

// AssistantText returns an assistant text entry.
func AssistantText(s string) Entry { return Entry{Kind: KindAssistantText, Text: s} }

// ToolCallEntry returns a tool call entry with raw JSON arguments.
func ToolCallEntry(callID, name, arguments string) Entry {
	return Entry{Kind: KindToolCall, CallID: callID, Name: name, Arguments: arguments}
}

// ToolResultEntry returns a tool result entry.
func ToolResultEntry(callID, name, output string, isError bool) Entry {
	return Entry{Kind: KindToolResult, CallID: callID, Name: name, Output: output, IsError: isError}
}

// Validate reports whether e is a well-formed entry of a known kind.
func (e *Entry) Validate() error {
	switch e.Kind {
	case KindInput:
		if e.Role != RoleSystem && e.Role != RoleUser {
			return fmt.Errorf("input entry: role %q is not system or user", e.Role)
		}
	case KindAssistantText, KindReasoning:
	case KindToolCall:
		if e.CallID == "" || e.Name == "" {
			return fmt.Errorf("tool_call entry: call_id and name are required")
		}
	case KindToolResult:
		if e.CallID == "" {
			return fmt.Errorf("tool_result entry: call_id is required")
		}
	default:
		return fmt.Errorf("unknown entry kind %q", e.Kind)
	}
	for i := range e.Parts {
		switch e.Parts[i].Type {
		case PartText, PartImage, PartFile:
		default:
			return fmt.Errorf("%s entry: unknown content part type %q", e.Kind, e.Parts[i].Type)
		}
	}
	return nil
}

// ContentText is the textual projection of an input entry: its Content, or
// its parts joined by newlines when it has parts.
func (e *Entry) ContentText() string {
	if len(e.Parts) == 0 {
		return e.Content
	}
	return PartsText(e.Parts)
}

// PartsText projects content parts to text: text parts verbatim, images as
// "[image: <mime>, <size>]" or "[image: <url>]", files as
// "[file <name>: <mime>, <size>]", one per line.
func PartsText(parts []Part) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('\n')
		}
		switch p.Type {
		case PartText:
			b.WriteString(p.Text)
		case PartImage:
			if p.URL != "" {
				fmt.Fprintf(&b, "[image: %s]", p.URL)
			} else {
				fmt.Fprintf(&b, "[image: %s, %s]", p.MimeType, humanSize(base64Len(p.Data)))
			}
		case PartFile:
			name := p.Filename
			if name == "" {
				name = "file"
			}
			if p.URL != "" {
				fmt.Fprintf(&b, "[file %s: %s]", name, p.URL)
			} else {
				fmt.Fprintf(&b, "[file %s: %s, %s]", name, p.MimeType, humanSize(base64Len(p.Data)))
			}
		}
	}
	return b.String()
}

func base64Len(s string) int {
	n := len(s) / 4 * 3
	if strings.HasSuffix(s, "==") {
		n -= 2
	} else if strings.HasSuffix(s, "=") {
		n--
	}
	return n
}

func humanSize(n int) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1024*1024:
		return fmt.Sprintf("%.1f KB", float64(n)/1024)
	default:
		return fmt.Sprintf("%.1f MB", float64(n)/(1024*1024))
	}
}

// PendingToolCalls returns the tool calls in entries that have no result,
// in transcript order. Calls and results pair by call id only; duplicate ids
// pair by occurrence count.
func PendingToolCalls(entries []Entry) []Entry {
	var results map[string]int
	for i := range entries {
		if entries[i].Kind == KindToolResult {
			if results == nil {
				results = make(map[string]int)
			}
			results[entries[i].CallID]++
		}
	}
	var pending []Entry
	for i := range entries {
		e := &entries[i]
		if e.Kind != KindToolCall {
			continue
		}
		if results[e.CallID] > 0 {
			results[e.CallID]--
			continue
		}
		pending = append(pending, *e)
	}
	return pending
}

// DropDanglingToolCalls returns entries without the tool calls that have no
// result. The input is not modified.
func DropDanglingToolCalls(entries []Entry) []Entry {
	pending := PendingToolCalls(entries)
	if len(pending) == 0 {
		return entries
	}
	drop := make(map[string]int, len(pending))
	for _, p := range pending {
		drop[p.CallID]++
	}
	// Dangling calls are the last occurrences of their id beyond the results,
	// so drop from the end.
	out := make([]Entry, 0, len(entries)-len(pending))
	keep := make([]bool, len(entries))
	for i := len(entries) - 1; i >= 0; i-- {
		e := &entries[i]
		if e.Kind == KindToolCall && drop[e.CallID] > 0 {
			drop[e.CallID]--
			continue
		}
		keep[i] = true
	}
	for i := range entries {
		if keep[i] {
			out = append(out, entries[i])
		}
	}
	return out
}

// wireSafeArguments returns the arguments to store for a call that was
// rejected: the original when it is a JSON object, else {"_raw": original}.
func wireSafeArguments(args string) string {
	if isJSONObject(args) {
		return args
	}
	b, _ := json.Marshal(map[string]string{"_raw": args})
	return string(b)
}

func isJSONObject(s string) bool {
	t := strings.TrimSpace(s)
	if len(t) == 0 || t[0] != '{' {
		return false
	}
	return json.Valid([]byte(t))
}

// NormalizeAnsweredCalls returns entries where every tool call that already
// has a result carries wire-safe arguments (a JSON object). Dangling calls
// keep their raw bytes so a resume re-rejects them with the true error. The
// input is not modified; the same slice is returned when nothing changes.
func NormalizeAnsweredCalls(entries []Entry) []Entry {
	pending := PendingToolCalls(entries)
	dangling := make(map[string]int, len(pending))
	for _, p := range pending {
		dangling[p.CallID]++
	}
	// The dangling occurrences of an id are its last ones.
	seen := make(map[string]int)
	total := make(map[string]int)
	for i := range entries {
		if entries[i].Kind == KindToolCall {
			total[entries[i].CallID]++
		}
	}
	var out []Entry
	for i := range entries {
		e := &entries[i]
		if e.Kind != KindToolCall {
			continue
		}
		seen[e.CallID]++
		answered := seen[e.CallID] <= total[e.CallID]-dangling[e.CallID]
		if !answered || isJSONObject(e.Arguments) {
			continue
		}
		if out == nil {
			out = append([]Entry(nil), entries...)
		}
		out[i].Arguments = wireSafeArguments(e.Arguments)
	}
	if out == nil {
		return entries
	}
	return out
}
