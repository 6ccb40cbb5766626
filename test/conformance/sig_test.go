package conformance

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// sig renders events in the notation of the loop's conformance tests,
// with the key fields of each event and its turn ("@n"): run_started's
// agent and input, tool calls' ids, names, arguments and outputs, the
// terminal events' output, turns, usage and final agent, or error type,
// message, hint and retryability. Consecutive deltas of one kind collapse
// into one "TD+(text)", whose text is their concatenation: the fleet may
// coalesce deltas, never change their text.
//
// The fleet's additions are mapped here, explicitly:
//   - run_started is published as *bus.RunStarted, the loop's RunStarted
//     plus the claiming worker (and a parent run id): it renders as the
//     loop's RS; wireSig checks the worker and the parent on its own;
//   - run_resumed (a later claim of the same submission) has no in-process
//     counterpart and renders as RR(worker,attempt,from_turn): a run that
//     one worker claimed once must have none, so any RR is a mismatch.
func sig(t *testing.T, evs []loop.Event) []string {
	t.Helper()
	var out []string
	var deltas strings.Builder
	deltaKind := ""
	deltaTurn := 0
	flush := func() {
		if deltaKind != "" {
			out = append(out, fmt.Sprintf("%s+(%s)@%d", deltaKind, deltas.String(), deltaTurn))
			deltaKind = ""
			deltas.Reset()
		}
	}
	for _, ev := range evs {
		h := ev.Header()
		var kind, text string
		switch e := ev.(type) {
		case *loop.TextDelta:
			kind, text = "TD", e.Delta
		case *loop.ReasoningDelta:
			kind, text = "RD", e.Delta
		}
		if kind != "" {
			if kind != deltaKind || h.Turn != deltaTurn {
				flush()
				deltaKind, deltaTurn = kind, h.Turn
			}
			deltas.WriteString(text)
			continue
		}
		flush()
		var s string
		switch e := ev.(type) {
		case *loop.RunStarted:
			s = fmt.Sprintf("RS(%s,[%s],ckpt=%v)", e.Agent, entriesSig(e.Input), e.FromCheckpoint)
		case *bus.RunStarted:
			s = fmt.Sprintf("RS(%s,[%s],ckpt=%v)", e.Agent, entriesSig(e.Input), e.FromCheckpoint)
		case *bus.RunResumed:
			s = fmt.Sprintf("RR(%s,%d,%d)", e.Worker, e.Attempt, e.FromTurn)
		case *loop.TurnStarted:
			s = fmt.Sprintf("TS(%d)", e.TurnNo)
		case *loop.TurnEnded:
			s = fmt.Sprintf("TE(%d)", e.TurnNo)
		case *loop.OutputDiscarded:
			s = "OD"
		case *loop.MessageCompleted:
			s = "MC[" + entriesSig(e.Entries) + "]"
		case *loop.ToolCallStarted:
			s = fmt.Sprintf("TCS(%s,%s,%s)", e.Call.ID, e.Call.Name, e.Call.Arguments)
		case *loop.ToolCallCompleted:
			s = fmt.Sprintf("TCC(%s,err=%v,%s)", e.Call.ID, e.IsError, e.Output)
		case *loop.ToolCallFailed:
			s = fmt.Sprintf("TCF(%s)", e.Call.ID)
		case *loop.RunCompleted:
			fin := "<nil>"
			if e.FinishReason != nil {
				fin = *e.FinishReason
			}
			s = fmt.Sprintf("RC(%s,turns=%d,finish=%s,final=%s,usage=%s)", jsonOf(t, e.Output), e.Turns, fin, e.FinalAgent, jsonOf(t, e.Usage))
		case *loop.RunFailed:
			s = fmt.Sprintf("RF(%s|%s|hint=%s|retryable=%v)", e.Error.Type, e.Error.Message, e.Error.Hint, e.Error.Retryable)
		default:
			s = string(ev.Type())
		}
		out = append(out, fmt.Sprintf("%s@%d", s, h.Turn))
	}
	flush()
	return out
}

// wireEvents decodes a fleet run's envelopes into events (their agent and
// turn come from the envelope), checking what the fleet adds to them: the
// seqs are 1, 2, …; run_started names the worker that claimed the run and
// no parent.
func wireEvents(t *testing.T, envs []*bus.Envelope, worker string) []loop.Event {
	t.Helper()
	out := make([]loop.Event, 0, len(envs))
	for i, env := range envs {
		if env.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: %v", i, env.Seq, fleettest.Types(envs))
		}
		ev, err := env.Event()
		if err != nil {
			t.Fatalf("event %d (%s): %v", env.Seq, env.Type, err)
		}
		if rs, ok := ev.(*bus.RunStarted); ok {
			if rs.Worker != worker || rs.ParentRunID != "" {
				t.Fatalf("run_started names worker %q parent %q, want worker %q and no parent", rs.Worker, rs.ParentRunID, worker)
			}
		}
		out = append(out, ev)
	}
	return out
}

func entriesSig(es []loop.Entry) string {
	parts := make([]string, 0, len(es))
	for _, e := range es {
		parts = append(parts, entrySig(e))
	}
	return strings.Join(parts, " ")
}

func entrySig(e loop.Entry) string {
	switch e.Kind {
	case loop.KindInput:
		return fmt.Sprintf("In(%s,%s)", e.Role, e.ContentText())
	case loop.KindAssistantText:
		return "Txt(" + e.Text + ")"
	case loop.KindReasoning:
		return "Rsn(" + e.Text + ")"
	case loop.KindToolCall:
		return fmt.Sprintf("Call(%s,%s,%s)", e.CallID, e.Name, e.Arguments)
	case loop.KindToolResult:
		if e.IsError {
			return fmt.Sprintf("ResErr(%s,%s)", e.CallID, e.Output)
		}
		return fmt.Sprintf("Res(%s,%s)", e.CallID, e.Output)
	}
	return string(e.Kind)
}

// jsonOf is v as JSON with its object keys sorted: a Go value in process
// and its decoding off the wire render alike when they carry one value.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %T: %v", v, err)
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	b, err = json.Marshal(generic)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
