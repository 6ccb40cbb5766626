package store

import (
	"bytes"
	"encoding/json"
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
