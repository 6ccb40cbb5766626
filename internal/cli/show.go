package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// printStatus writes a run's status for people.
func printStatus(w io.Writer, st *bus.StatusReply) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	line := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, args...)...) }
	line("run", "%s", st.RunID)
	line("agent", "%s", st.Agent)
	s := string(st.Status) + heldBy(st.Status, st.Worker)
	line("status", "%s, attempt %d, %d turn%s", s, st.Attempt, st.Turns, plural(st.Turns))
	if st.Waiting != "" {
		line("waiting", "%s", st.Waiting)
	}
	if st.SessionID != "" {
		line("session", "%s", st.SessionID)
	}
	if st.ParentRunID != "" {
		line("parent", "%s", st.ParentRunID)
	}
	if a := st.Awaiting; a != nil {
		line("awaiting", "a decision on call %s, until %s", a.CallID, a.Deadline.UTC().Format(time.RFC3339))
		line("", "decide: lovia approve %s %s (or --reject)", st.RunID, a.CallID)
	}
	if r := st.Result; r != nil {
		line("usage", "%d input + %d output = %d tokens", r.Usage.InputTokens, r.Usage.OutputTokens, r.Usage.TotalTokens)
	}
	if e := st.Error; e != nil {
		line("error", "%s: %s", e.Type, e.Message)
		if e.Hint != "" {
			line("hint", "%s", e.Hint)
		}
	}
	_ = tw.Flush()
	if st.Result != nil {
		printOutput(w, st.Result.Output)
	}
}

// printOutput writes a run's output under an "output:" line: text as it
// is, structured output as indented JSON.
func printOutput(w io.Writer, out any) {
	fmt.Fprintln(w, "\noutput:")
	switch o := out.(type) {
	case nil:
		fmt.Fprintln(w, "  (none)")
	case string:
		fmt.Fprintln(w, indent(strings.TrimRight(o, "\n"), "  "))
	default:
		b, _ := json.MarshalIndent(o, "  ", "  ")
		fmt.Fprintln(w, "  "+string(b))
	}
}

func indent(s, pre string) string {
	return pre + strings.ReplaceAll(s, "\n", "\n"+pre)
}

// printSession writes a session's conversation for people: each run's
// entries in order, tool calls and results on one line each. The
// segments' meta (the loop's context state) is the runtime's, not the
// conversation's, and is left out.
func printSession(w io.Writer, rep *bus.SessionReply) {
	n := 0
	for _, s := range rep.Segments {
		n += len(s.Entries)
	}
	if len(rep.Segments) == 0 {
		fmt.Fprintf(w, "session %s is empty (no run has completed in it)\n", rep.SessionID)
		return
	}
	fmt.Fprintf(w, "session %s: %d run%s, %d entr%s\n", rep.SessionID, len(rep.Segments), plural(len(rep.Segments)), n, map[bool]string{true: "y", false: "ies"}[n == 1])
	for _, s := range rep.Segments {
		fmt.Fprintf(w, "\nrun %s\n", s.RunID)
		for _, e := range s.Entries {
			fmt.Fprintln(w, "  "+entryLine(e))
		}
	}
}

// entryLine is one transcript entry on one line.
func entryLine(e loop.Entry) string {
	switch e.Kind {
	case loop.KindInput:
		text := e.Content
		if text == "" {
			var parts []string
			for _, p := range e.Parts {
				if p.Type == loop.PartText {
					parts = append(parts, p.Text)
				} else {
					parts = append(parts, "["+string(p.Type)+"]")
				}
			}
			text = strings.Join(parts, " ")
		}
		return string(e.Role) + ": " + short(text, 300)
	case loop.KindAssistantText:
		return "assistant: " + short(e.Text, 300)
	case loop.KindReasoning:
		if e.Text == "" {
			return "(thinking, redacted)"
		}
		return "(thinking) " + short(e.Text, 200)
	case loop.KindToolCall:
		return fmt.Sprintf("→ %s(%s)  [call %s]", e.Name, short(e.Arguments, 200), e.CallID)
	case loop.KindToolResult:
		mark := "←"
		if e.IsError {
			mark = "✗"
		}
		return fmt.Sprintf("%s %s: %s", mark, e.Name, short(e.Output, 300))
	}
	return string(e.Kind)
}

// metadataText is a run's metadata as key=value pairs, sorted.
func metadataText(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		v, isString := m[k].(string)
		if !isString {
			b, _ := json.Marshal(m[k])
			v = string(b)
		}
		parts[i] = k + "=" + v
	}
	return strings.Join(parts, " ")
}

// heldBy names the worker of a run: the one it runs on, or for a run
// that is not running the one that held it last.
func heldBy(status bus.RunState, worker string) string {
	switch {
	case worker == "":
		return ""
	case status == bus.StateRunning:
		return " on " + worker
	}
	return " (last on " + worker + ")"
}
