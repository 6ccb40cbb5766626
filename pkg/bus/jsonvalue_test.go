package bus_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

type stamped struct {
	Result int       `json:"result"`
	At     time.Time `json:"at"`
}

// TestMsgpackEventOfGoValue: a Go value with a time.Time in run_completed's
// output or tool_call_completed's result (a code agent's typed output, a Go
// tool's result) decodes from a msgpack envelope as from a JSON one: its
// JSON value. msgpack's own encoding of a time.Time is an extension type,
// which the wire refuses: the event could not be read at all.
func TestMsgpackEventOfGoValue(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	want := map[string]any{"result": int64(7), "at": "2026-01-02T03:04:05Z"}
	rc := &loop.RunCompleted{Output: stamped{Result: 7, At: at}, Turns: 1}
	tc := &loop.ToolCallCompleted{Call: loop.ToolCall{ID: "c1", Name: "when"}, Result: stamped{Result: 7, At: at}, Output: "x"}
	for _, ev := range []loop.Event{rc, tc} {
		for _, enc := range []bus.Encoding{bus.JSON, bus.Msgpack} {
			data, err := bus.EncodeEvent(enc, "r1", 1, at, ev)
			require.NoError(t, err)
			env, err := bus.DecodeEnvelope(nil, data)
			require.NoError(t, err, "%s %s", enc, ev.Type())
			built, err := bus.NewEnvelope(enc, "r1", 1, at, ev)
			require.NoError(t, err)
			require.Equal(t, env.Data, built.Data, "EncodeEvent and NewEnvelope write the same data")
			got, err := env.Event()
			require.NoError(t, err, "%s %s", enc, ev.Type())
			var v any
			switch g := got.(type) {
			case *loop.RunCompleted:
				v = g.Output
			case *loop.ToolCallCompleted:
				v = g.Result
			}
			if enc == bus.JSON {
				want["result"] = float64(7)
			} else {
				want["result"] = int64(7)
			}
			require.Equal(t, want, v, "%s %s", enc, ev.Type())
		}
	}
	require.IsType(t, stamped{}, rc.Output, "the event given is not changed")
	require.IsType(t, stamped{}, tc.Result, "the event given is not changed")
}

func TestJSONValue(t *testing.T) {
	same := map[string]any{"a": []any{"x", int64(1), 1.5, nil, true}}
	v, err := bus.JSONValue(same)
	require.NoError(t, err)
	require.Equal(t, same, v, "a JSON-like value as it is")
	v, err = bus.JSONValue(stamped{Result: 1 << 60})
	require.NoError(t, err)
	require.Equal(t, map[string]any{"result": int64(1 << 60), "at": "0001-01-01T00:00:00Z"}, v, "integers stay exact")
	_, err = bus.JSONValue(make(chan int))
	require.Error(t, err)
}
