package bus_test

import (
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

func TestDecodeRunsList(t *testing.T) {
	t.Parallel()
	mp, err := msgpack.Marshal(map[string]any{"status": "running,parked", "limit": 5})
	require.NoError(t, err)
	mpList, err := msgpack.Marshal(map[string]any{"status": []string{"failed"}})
	require.NoError(t, err)
	msgpackHeader := nats.Header{bus.HeaderContentType: []string{bus.ContentTypeMsgpack}}
	for _, tc := range []struct {
		name   string
		h      nats.Header
		body   []byte
		states []bus.RunState
		err    string
	}{
		{"empty body: every run", nil, nil, nil, ""},
		{"a list", nil, []byte(`{"status": ["queued", "running"]}`), []bus.RunState{"queued", "running"}, ""},
		{"one string, comma-separated", nil, []byte(`{"status": "completed, failed"}`), []bus.RunState{"completed", "failed"}, ""},
		{"msgpack string", msgpackHeader, mp, []bus.RunState{"running", "parked"}, ""},
		{"msgpack list", msgpackHeader, mpList, []bus.RunState{"failed"}, ""},
		{"unknown status", nil, []byte(`{"status": "done"}`), nil, `unknown status "done"; known statuses: queued, running, parked, completed, failed`},
		{"unknown field", nil, []byte(`{"agnet": "a"}`), nil, "unknown field; known fields: agent, awaiting, cursor, limit"},
		{"a number for status", nil, []byte(`{"status": 3}`), nil, "give a list of statuses or one string"},
		{"limit too large", nil, []byte(`{"limit": 501}`), nil, "give 1 to 500"},
		{"until before since", nil, []byte(`{"since": "2026-12-02T00:00:00Z", "until": "2026-12-01T00:00:00Z"}`), nil, "must be after since"},
		{"a bad agent", nil, []byte(`{"agent": "a.b"}`), nil, "agent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := bus.DecodeRunsList(tc.h, tc.body)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.states, req.States())
		})
	}
}

// FuzzDecodeRunsList: any body decodes to a valid request or an error,
// never a panic.
func FuzzDecodeRunsList(f *testing.F) {
	f.Add([]byte(`{"status": ["queued"], "limit": 10, "cursor": "x"}`))
	f.Add([]byte(`{"status": "a,b", "since": "2026-12-01T00:00:00Z"}`))
	f.Add([]byte{0x81, 0xa6, 's', 't', 'a', 't', 'u', 's', 0x91, 0xa6, 'f', 'a', 'i', 'l', 'e', 'd'})
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := bus.DecodeRunsList(nil, body)
		if err == nil {
			require.NoError(t, req.Validate())
		}
	})
}
