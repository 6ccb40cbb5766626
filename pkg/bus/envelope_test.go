package bus_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

var encodings = []bus.Encoding{bus.JSON, bus.Msgpack}

func other(enc bus.Encoding) bus.Encoding {
	if enc == bus.JSON {
		return bus.Msgpack
	}
	return bus.JSON
}

// wireEqual strips what the wire does not carry.
func wireEqual(ev loop.Event) loop.Event {
	switch e := ev.(type) {
	case *loop.RunFailed:
		c := *e
		c.Err = nil
		return &c
	case *loop.ToolCallFailed:
		c := *e
		c.Err = nil
		return &c
	}
	return ev
}

func TestEnvelopeRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 6, 1, 12, 30, 45, 123456789, time.FixedZone("CEST", 2*3600))
	events := sampleEvents()
	require.Len(t, events, len(bus.EventTypes()), "one sample per event type")
	for i, ev := range events {
		for _, enc := range encodings {
			t.Run(string(ev.Type())+"/"+string(enc), func(t *testing.T) {
				t.Parallel()
				seq := uint64(i + 1)
				env, err := bus.NewEnvelope(enc, "run-1", seq, at, ev)
				require.NoError(t, err)
				body, err := env.Marshal()
				require.NoError(t, err)

				check := func(t *testing.T, h nats.Header, body []byte, wantEnc bus.Encoding) {
					got, err := bus.DecodeEnvelope(h, body)
					require.NoError(t, err)
					require.Equal(t, wantEnc, got.Encoding)
					require.Equal(t, "run-1", got.RunID)
					require.Equal(t, seq, got.Seq)
					require.Equal(t, ev.Type(), got.Type)
					require.True(t, at.Equal(got.Time), "time %s", got.Time)
					require.Equal(t, time.UTC, got.Time.Location())
					require.Equal(t, ev.Header().Agent, got.Agent)
					require.Equal(t, ev.Header().Turn, got.Turn)
					gotEv, err := got.Event()
					require.NoError(t, err)
					require.Equal(t, wireEqual(ev), gotEv)
					require.Equal(t, bus.IsTerminalType(ev.Type()), got.IsTerminal())
				}
				t.Run("with Content-Type", func(t *testing.T) {
					check(t, env.Headers(), body, enc)
				})
				t.Run("sniffed", func(t *testing.T) {
					check(t, nil, body, enc)
				})
				t.Run("transcoded", func(t *testing.T) {
					decoded, err := bus.DecodeEnvelope(nil, body)
					require.NoError(t, err)
					to := other(enc)
					tb, err := decoded.MarshalAs(to)
					require.NoError(t, err)
					check(t, nats.Header{bus.HeaderContentType: {to.ContentType()}}, tb, to)
					// and back: byte-identical to a direct encoding.
					back, err := bus.DecodeEnvelope(nil, tb)
					require.NoError(t, err)
					bb, err := back.MarshalAs(enc)
					require.NoError(t, err)
					require.Equal(t, body, bb)
				})
			})
		}
	}
}

func TestEnvelopeWireShape(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	ev := &loop.TextDelta{EventHeader: hdr("demo", 1), Delta: "<b>"}
	env, err := bus.NewEnvelope(bus.JSON, "run-1", 3, at, ev)
	require.NoError(t, err)
	body, err := env.Marshal()
	require.NoError(t, err)
	require.JSONEq(t, `{"run_id":"run-1","seq":3,"type":"text_delta","time":"2025-06-01T12:00:00Z","agent":"demo","turn":1,"data":{"delta":"<b>"}}`, string(body))
	require.Contains(t, string(body), `"<b>"`, "no HTML escaping")

	h := env.Headers()
	require.Equal(t, "run-1.3", h.Get(bus.HeaderMsgID))
	require.Equal(t, "text_delta", h.Get(bus.HeaderEvent))
	require.Equal(t, "3", h.Get(bus.HeaderSeq))
	require.Equal(t, "application/json", h.Get(bus.HeaderContentType))

	// json.Marshal of an msgpack envelope prints JSON.
	menv, err := bus.NewEnvelope(bus.Msgpack, "run-1", 3, at, ev)
	require.NoError(t, err)
	js, err := json.Marshal(menv)
	require.NoError(t, err)
	require.JSONEq(t, string(body), string(js))
}

func TestEnvelopeUnknownType(t *testing.T) {
	t.Parallel()
	for _, enc := range encodings {
		t.Run(string(enc), func(t *testing.T) {
			t.Parallel()
			body := []byte(`{"run_id":"r1","seq":1,"type":"future_event","time":"2025-06-01T12:00:00Z","agent":"a","turn":0,"data":{"n":1,"x":[1.5,"s"]}}`)
			if enc == bus.Msgpack {
				env, err := bus.DecodeEnvelope(nil, body)
				require.NoError(t, err)
				body, err = env.MarshalAs(bus.Msgpack)
				require.NoError(t, err)
			}
			env, err := bus.DecodeEnvelope(nil, body)
			require.NoError(t, err, "an unknown type still decodes")
			_, err = env.Event()
			require.ErrorIs(t, err, bus.ErrUnknownEventType)
			require.NotErrorIs(t, err, bus.ErrMalformed)
			var data map[string]any
			require.NoError(t, env.DecodeData(&data))
			require.EqualValues(t, 1, data["n"], "integers stay integers across encodings")
			out, err := env.MarshalAs(bus.JSON)
			require.NoError(t, err)
			require.JSONEq(t, `{"run_id":"r1","seq":1,"type":"future_event","time":"2025-06-01T12:00:00Z","agent":"a","turn":0,"data":{"n":1,"x":[1.5,"s"]}}`, string(out))
		})
	}
}

func TestDecodeEnvelopeRejects(t *testing.T) {
	t.Parallel()
	valid := map[string]any{"run_id": "r1", "seq": 1, "type": "text_delta", "time": "2025-06-01T12:00:00Z", "agent": "a", "turn": 0, "data": map[string]any{}}
	cases := []struct {
		name  string
		patch func(m map[string]any)
		field string
	}{
		{"bad run id", func(m map[string]any) { m["run_id"] = "a.b" }, "run_id"},
		{"seq zero", func(m map[string]any) { m["seq"] = 0 }, "seq"},
		{"no type", func(m map[string]any) { delete(m, "type") }, "type"},
		{"bad time", func(m map[string]any) { m["time"] = "yesterday" }, "time"},
		{"data not an object", func(m map[string]any) { m["data"] = []any{1} }, "data"},
	}
	for _, tc := range cases {
		for _, enc := range encodings {
			t.Run(tc.name+"/"+string(enc), func(t *testing.T) {
				t.Parallel()
				m := map[string]any{}
				for k, v := range valid {
					m[k] = v
				}
				tc.patch(m)
				body, err := bus.Marshal(enc, m)
				require.NoError(t, err)
				_, err = bus.DecodeEnvelope(nil, body)
				require.ErrorIs(t, err, bus.ErrMalformed)
				require.ErrorIs(t, err, bus.ErrInvalidRequest)
				require.Contains(t, err.Error(), tc.field)
			})
		}
	}
	t.Run("negative seq", func(t *testing.T) {
		t.Parallel()
		_, err := bus.DecodeEnvelope(nil, []byte(`{"run_id":"r1","seq":-1}`))
		require.ErrorIs(t, err, bus.ErrMalformed)
	})
	t.Run("not a body", func(t *testing.T) {
		t.Parallel()
		_, err := bus.DecodeEnvelope(nil, []byte(`"text"`))
		require.ErrorIs(t, err, bus.ErrUnknownEncoding)
		_, err = bus.DecodeEnvelope(nats.Header{"Content-Type": {"text/plain"}}, []byte(`{}`))
		require.ErrorIs(t, err, bus.ErrUnknownEncoding)
		require.True(t, strings.Contains(err.Error(), "text/plain"))
	})
}
