package bus_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// Every decoder of the package is fuzzed: arbitrary bytes, with or without
// a Content-Type, must never panic, and whatever decodes must encode and
// decode again. Seeds are valid bodies of every kind in both encodings plus
// hostile ones (f.Add below, and testdata/fuzz).

// header picks a Content-Type: none (sniff), JSON, msgpack or bogus.
func header(ct uint8) nats.Header {
	switch ct % 4 {
	case 1:
		return nats.Header{bus.HeaderContentType: {bus.ContentTypeJSON}}
	case 2:
		return nats.Header{bus.HeaderContentType: {bus.ContentTypeMsgpack}}
	case 3:
		return nats.Header{bus.HeaderContentType: {"application/json; charset=\x00"}}
	}
	return nil
}

func ctOf(enc bus.Encoding) uint8 {
	if enc == bus.Msgpack {
		return 2
	}
	return 1
}

var hostileSeeds = [][]byte{
	nil, {}, []byte("{"), []byte("[]"), []byte(`{"a":`), []byte("null"),
	{0xdf, 0xff, 0xff, 0xff, 0xff}, {0x81, 0xa1, 'a', 0xdd, 0xff, 0xff, 0xff, 0xff},
	{0x81, 0xa5, 'i', 'n', 'p', 'u', 't', 0xdc, 0xff, 0xff}, {0x81, 0xa4, 't', 'i', 'm', 'e', 0xd6, 0xff, 0, 0, 0, 0},
	{0x80}, {0x90}, {0xc1},
}

func FuzzDecodeRunRequest(f *testing.F) {
	for _, req := range sampleRequests() {
		for _, enc := range encodings {
			b, err := bus.Marshal(enc, req)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b, ctOf(enc))
			f.Add(b, uint8(0))
		}
	}
	for _, b := range hostileSeeds {
		f.Add(b, uint8(0))
		f.Add(b, uint8(2))
	}
	f.Fuzz(func(t *testing.T, body []byte, ct uint8) {
		req, enc, err := bus.DecodeRunRequest(header(ct), body)
		if err != nil {
			return
		}
		for _, to := range []bus.Encoding{enc, other(enc)} {
			b, err := bus.Marshal(to, req)
			if err != nil {
				continue // e.g. a msgpack NaN has no JSON form
			}
			if _, _, err := bus.DecodeRunRequest(nil, b); err != nil {
				t.Fatalf("re-encoded request does not decode (%s): %v\n%q", to, err, b)
			}
		}
	})
}

func FuzzDecodeEnvelope(f *testing.F) {
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	for i, ev := range sampleEvents() {
		for _, enc := range encodings {
			b, err := bus.EncodeEvent(enc, "run-1", uint64(i+1), at, ev)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b, ctOf(enc))
			f.Add(b, uint8(0))
		}
	}
	for _, b := range hostileSeeds {
		f.Add(b, uint8(0))
	}
	f.Fuzz(func(t *testing.T, body []byte, ct uint8) {
		env, err := bus.DecodeEnvelope(header(ct), body)
		if err != nil {
			return
		}
		_, _ = env.Event()
		for _, to := range encodings {
			b, err := env.MarshalAs(to)
			if err != nil {
				continue
			}
			if _, err := bus.DecodeEnvelope(nil, b); err != nil {
				t.Fatalf("re-encoded envelope does not decode (%s): %v\n%q", to, err, b)
			}
		}
	})
}

// FuzzDecodeEventData feeds arbitrary data to every event type's decoder.
func FuzzDecodeEventData(f *testing.F) {
	types := bus.EventTypes()
	for i, ev := range sampleEvents() {
		for _, enc := range encodings {
			b, err := bus.Marshal(enc, ev)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(uint8(i), enc == bus.Msgpack, b)
		}
	}
	for _, b := range hostileSeeds {
		f.Add(uint8(0), true, b)
	}
	f.Fuzz(func(t *testing.T, typ uint8, msgpack bool, data []byte) {
		enc := bus.JSON
		if msgpack {
			enc = bus.Msgpack
		}
		env := &bus.Envelope{RunID: "r1", Seq: 1, Type: types[int(typ)%len(types)], Data: data, Encoding: enc, Time: time.Unix(0, 0)}
		ev, err := env.Event()
		if err != nil {
			return
		}
		for _, to := range encodings {
			if _, err := bus.Marshal(to, ev); err != nil {
				continue
			}
			if _, err := env.MarshalAs(to); err != nil {
				continue
			}
		}
	})
}

func FuzzDecodeEntries(f *testing.F) {
	seedEntries := [][]byte{
		[]byte(`[{"kind":"input","role":"user","content":"hi"},{"kind":"tool_call","call_id":"c","name":"n","arguments":"{}"}]`),
		[]byte(`[{"kind":"tool_result","call_id":"c","output":"x","raw":{"a":[1,2]},"parts":[{"type":"image","url":"u"}]}]`),
	}
	for _, b := range seedEntries {
		f.Add(b, uint8(0))
		entries, err := bus.UnmarshalEntries(bus.JSON, b)
		if err != nil {
			f.Fatal(err)
		}
		mb, err := bus.MarshalEntries(bus.Msgpack, entries)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(mb, uint8(2))
	}
	for _, b := range hostileSeeds {
		f.Add(b, uint8(0))
	}
	f.Fuzz(func(t *testing.T, body []byte, ct uint8) {
		entries, enc, err := bus.DecodeEntries(header(ct), body)
		if err != nil {
			return
		}
		for _, to := range []bus.Encoding{enc, other(enc)} {
			b, err := bus.MarshalEntries(to, entries)
			if err != nil {
				continue
			}
			if _, err := bus.UnmarshalEntries(to, b); err != nil {
				t.Fatalf("re-encoded entries do not decode (%s): %v\n%q", to, err, b)
			}
		}
	})
}

// FuzzDecodeControl covers every request/reply body, and DecodeReply.
func FuzzDecodeControl(f *testing.F) {
	controls := sampleControls()
	for i, c := range controls {
		for _, enc := range encodings {
			b, err := bus.Marshal(enc, c.msg)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(uint8(i), b, ctOf(enc), false)
			f.Add(uint8(i), b, uint8(0), true)
		}
	}
	for _, b := range hostileSeeds {
		f.Add(uint8(0), b, uint8(0), false)
	}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte, ct uint8, errorReply bool) {
		c := controls[int(kind)%len(controls)]
		h := header(ct)
		if errorReply {
			if h == nil {
				h = nats.Header{}
			}
			h[bus.HeaderServiceErrorCode] = []string{"400"}
			_ = bus.DecodeReply(h, body, c.empty())
			return
		}
		v := c.empty()
		enc, err := bus.DecodeControl(h, body, v)
		if err != nil {
			return
		}
		for _, to := range []bus.Encoding{enc, other(enc)} {
			b, err := bus.Marshal(to, v)
			if err != nil {
				continue
			}
			if _, err := bus.DecodeControl(nil, b, c.empty()); err != nil {
				t.Fatalf("re-encoded %T does not decode (%s): %v\n%q", v, to, err, b)
			}
		}
	})
}
