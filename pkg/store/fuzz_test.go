package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// FuzzDecodeFrame feeds arbitrary bytes to the value decoders: they must
// fail cleanly (ErrCorrupt), never panic, and a chunk manifest must never
// yield a cleanup filter outside its id's chunk keys.
func FuzzDecodeFrame(f *testing.F) {
	entries := []loop.Entry{
		loop.UserText("hi"),
		{Kind: loop.KindToolResult, CallID: "c1", Output: "5", Raw: json.RawMessage(`5`), Parts: []loop.Part{{Type: loop.PartText, Text: "t"}}},
	}
	head := loop.RunHead{Agent: "a", Turns: 2, Status: loop.StatusCompleted, Output: map[string]any{"k": []any{1, "x"}}, ContextState: map[string]any{"context": map[string]any{"version": 3}}, UpdatedAt: time.Unix(1, 0)}
	for _, v := range []any{
		&headRecord{Head: head, Entries: 2, Batches: 1, Last: "r.b.00000000.n"},
		&batchRecord{Prev: "r.b.0.n", Base: 2, Entries: entries},
		&segmentRecord{Order: 7, RunID: "r", Entries: entries, Meta: map[string]any{"m": 1}},
		&loop.MailMessage{Token: "t", Content: "c"},
		&RunRecord{RunID: "r", Status: RunCompleted, Result: "done"},
	} {
		b, err := marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	var manifest bytes.Buffer
	manifest.WriteByte(frameChunked)
	_ = msgpack.NewEncoder(&manifest).Encode(&chunkManifest{Prefix: "run-1.x.abc", Count: 2, Size: 10, CRC: 1})
	f.Add(manifest.Bytes())
	f.Add([]byte{})
	f.Add([]byte{frameInline, 0xdd, 0xff, 0xff, 0xff, 0xff})

	f.Fuzz(func(t *testing.T, data []byte) {
		var h headRecord
		_ = decodeFrame(data, &h)
		var b batchRecord
		_ = decodeFrame(data, &b)
		var s segmentRecord
		_ = decodeFrame(data, &s)
		var m loop.MailMessage
		_ = decodeFrame(data, &m)
		var r RunRecord
		_ = decodeFrame(data, &r)
		if filter := chunksOf(data); filter != "" && !validChunkPrefix(filter[:len(filter)-len(".>")]) {
			t.Fatalf("chunk filter %q escapes the chunk keys", filter)
		}
	})
}

// FuzzDecodeHoldings feeds arbitrary bytes to the holdings record's
// decoder: it must fail cleanly (ErrCorrupt), never panic, and a record
// it decodes must encode back to one that decodes the same.
func FuzzDecodeHoldings(f *testing.F) {
	f.Add(encodeHoldings([]Holding{
		{RunID: "r1", Ack: "$JS.ACK.LOVIA_RUNS.lovia_agent_calc.1.12.7.1764620000000000000.3", Seq: 12, Attempt: 1},
		{RunID: "r2", Ack: "$JS.ACK.a", Attempt: 0},
	}))
	f.Add([]byte(`{"runs":[{"run":"r1","ack":"$JS.ACK.a","seq":3,"attempt":1}]}`))
	f.Add([]byte{frameInline, 0x93, 0x02, 0x90, 0x91, 0x95})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		runs, err := decodeHoldings(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not match ErrCorrupt", err)
			}
			return
		}
		back, err := decodeHoldings(encodeHoldings(runs))
		if err != nil {
			t.Fatalf("a decoded record does not decode after encoding: %v", err)
		}
		if !slices.Equal(back, runs) {
			t.Fatalf("%+v became %+v", runs, back)
		}
	})
}
