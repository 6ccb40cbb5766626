package todo

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// ToolName is the name of the plugin's tool.
const ToolName = "todo_write"

// Status is a todo item's status.
type Status string

// Item statuses.
const (
	Pending    Status = "pending"
	InProgress Status = "in_progress"
	Completed  Status = "completed"
)

// Item is one entry of the list.
type Item struct {
	Content    string `json:"content" desc:"What to do, in the imperative (\"Run the tests\")."`
	Status     Status `json:"status,omitempty" desc:"pending (the default), in_progress or completed." jsonschema:"enum=pending|in_progress|completed,default=pending"`
	ActiveForm string `json:"active_form,omitempty" desc:"The same in the present continuous (\"Running the tests\"); defaults to content."`
}

// Result is the raw result of todo_write: the list as stored, after
// demotions. It is what the tool_call_completed event carries.
type Result struct {
	Todos []Item `json:"todos"`
	// Demoted counts the in_progress items turned into pending ones.
	Demoted int `json:"demoted,omitempty"`
}

type writeArgs struct {
	Todos []Item `json:"todos" desc:"The complete new list; it replaces the previous one."`
}

// Instructions is the text the plugin adds to the system prompt.
const Instructions = `You have a todo list (the todo_write tool). For work of three or more steps, write the list first, keep exactly one item in_progress while you work on it, mark items completed as soon as they are done, and rewrite the whole list each time: todo_write replaces it. The current list is shown to you in a <system-reminder> before each of your turns.`

// Plugin is the Todo plugin. It holds no state: one value serves every run.
type Plugin struct {
	tool *loop.Tool
}

// New returns the Todo plugin.
func New() *Plugin {
	p := &Plugin{}
	p.tool = loop.NewTool(ToolName,
		"Replace your todo list with todos (the complete list). At most one item may be in_progress.",
		func(_ context.Context, _ *loop.RunContext, in writeArgs) (Result, error) {
			return Normalize(in.Todos)
		},
		loop.WithRenderer(func(v any) (string, error) {
			r, ok := v.(Result)
			if !ok {
				return "", fmt.Errorf("todo_write: unexpected result %T", v)
			}
			return Render(r), nil
		}),
	)
	return p
}

// Name implements loop.Plugin.
func (p *Plugin) Name() string { return "todo" }

// Tools implements loop.PluginTools.
func (p *Plugin) Tools() []*loop.Tool { return []*loop.Tool{p.tool} }

// Instructions implements loop.PluginInstructions.
func (p *Plugin) Instructions(context.Context, *loop.RunContext) string { return Instructions }

// InjectView implements loop.PluginViewInjector: the current list as a
// transient <system-reminder> (nothing before the first todo_write).
func (p *Plugin) InjectView(_ context.Context, rc *loop.RunContext) []loop.Entry {
	items, ok := FromEntries(rc.Entries())
	if !ok {
		return nil
	}
	return []loop.Entry{loop.UserText(Reminder(items))}
}

// Normalize checks a list and demotes every in_progress item after the
// first to pending. An item without a status is pending; one without
// content or with an unknown status is an error the model sees.
func Normalize(items []Item) (Result, error) {
	out := Result{Todos: make([]Item, 0, len(items))}
	seenActive := false
	for i, it := range items {
		it.Content = strings.TrimSpace(it.Content)
		if it.Content == "" {
			return Result{}, &loop.ToolError{Message: fmt.Sprintf("todos[%d] has no content: give every item a short imperative description", i)}
		}
		switch it.Status {
		case "":
			it.Status = Pending // as lovia: models often leave it out
		case Pending, Completed:
		case InProgress:
			if seenActive {
				it.Status = Pending
				out.Demoted++
			}
			seenActive = true
		default:
			return Result{}, &loop.ToolError{Message: fmt.Sprintf("todos[%d] has status %q: use pending, in_progress or completed", i, it.Status)}
		}
		if strings.TrimSpace(it.ActiveForm) == "" {
			it.ActiveForm = it.Content
		}
		out.Todos = append(out.Todos, it)
	}
	return out, nil
}

// Render is the tool's output: the list as stored.
func Render(r Result) string {
	var b strings.Builder
	if len(r.Todos) == 0 {
		b.WriteString("Todo list cleared.")
	} else {
		fmt.Fprintf(&b, "Todo list updated (%d items):\n", len(r.Todos))
		writeList(&b, r.Todos)
	}
	if r.Demoted > 0 {
		fmt.Fprintf(&b, "\nOnly one item may be in_progress: %d later one(s) set to pending.", r.Demoted)
	}
	return strings.TrimRight(b.String(), "\n")
}

// Reminder is the transient text injected before a model call.
func Reminder(items []Item) string {
	var b strings.Builder
	b.WriteString("<system-reminder>\n")
	if len(items) == 0 {
		b.WriteString("Your todo list is empty.\n")
	} else {
		b.WriteString("Your current todo list (update it with todo_write as you go):\n")
		writeList(&b, items)
	}
	b.WriteString("</system-reminder>")
	return b.String()
}

func writeList(b *strings.Builder, items []Item) {
	for _, it := range items {
		switch it.Status {
		case Completed:
			fmt.Fprintf(b, "[x] %s\n", it.Content)
		case InProgress:
			fmt.Fprintf(b, "[>] %s (in progress: %s)\n", it.Content, it.ActiveForm)
		default:
			fmt.Fprintf(b, "[ ] %s\n", it.Content)
		}
	}
}

// FromEntries rebuilds the list from the newest valid todo_write call in a
// transcript: a call whose arguments parse and pass [Normalize] and whose
// result, when present, is not an error. ok is false when there is none.
func FromEntries(entries []loop.Entry) (items []Item, ok bool) {
	failed := map[string]bool{}
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		switch {
		case e.Kind == loop.KindToolResult && e.Name == ToolName && e.IsError:
			failed[e.CallID] = true
		case e.Kind == loop.KindToolCall && e.Name == ToolName && !failed[e.CallID]:
			var in writeArgs
			if err := json.Unmarshal([]byte(e.Arguments), &in); err != nil {
				continue
			}
			r, err := Normalize(in.Todos)
			if err != nil {
				continue
			}
			return r.Todos, true
		}
	}
	return nil, false
}
