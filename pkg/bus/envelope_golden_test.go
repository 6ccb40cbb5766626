package bus_test

import (
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/envelopes.golden from the current encoder")

// goldenEvents are sampleEvents plus events whose strings need escaping in
// JSON (HTML characters, which stay unescaped; control characters; U+2028;
// invalid UTF-8) and an agent that does.
func goldenEvents() []loop.Event {
	evs := sampleEvents()
	tricky := "<b>&amp;</b> \"q\" \\ \n\t\r\b\f \x01\x1f \u2028\u2029 é😀 \xff\xfe end"
	return append(evs,
		&loop.TextDelta{EventHeader: hdr("a<&>\"\\\n\u2028\xffé", 7), Delta: tricky},
		&loop.ToolCallStarted{EventHeader: hdr("", 0), Call: loop.ToolCall{ID: tricky, Name: "x", Arguments: `{"a": [1, 2], "b": "<>"}`}},
	)
}

// TestEnvelopeGoldenBytes pins the encoding of every event type, in both
// encodings, byte for byte: events are a public contract, so a change of
// the encoder must not change a byte. Regenerate with -update only for a
// deliberate change of the wire format.
func TestEnvelopeGoldenBytes(t *testing.T) {
	t.Parallel()
	times := []time.Time{
		time.Date(2025, 6, 1, 12, 30, 45, 123456789, time.FixedZone("CEST", 2*3600)),
		time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC),
		time.Date(2025, 6, 1, 12, 0, 0, 120000000, time.UTC),
	}
	var got strings.Builder
	for i, ev := range goldenEvents() {
		at := times[i%len(times)]
		seq := uint64(i*37 + 1)
		for _, enc := range encodings {
			body, err := bus.EncodeEvent(enc, "run-golden-1", seq, at, ev)
			require.NoError(t, err)
			env, err := bus.NewEnvelope(enc, "run-golden-1", seq, at, ev)
			require.NoError(t, err)
			viaEnv, err := env.Marshal()
			require.NoError(t, err)
			require.Equal(t, body, viaEnv, "EncodeEvent and NewEnvelope+Marshal agree")
			got.WriteString(string(ev.Type()) + " " + string(enc) + " ")
			if enc == bus.JSON {
				got.Write(body)
			} else {
				got.WriteString(hex.EncodeToString(body))
			}
			got.WriteString("\n")
		}
	}
	path := filepath.Join("testdata", "envelopes.golden")
	if *updateGolden {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got.String()), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	wantLines := strings.Split(string(want), "\n")
	gotLines := strings.Split(got.String(), "\n")
	require.Equal(t, len(wantLines), len(gotLines), "events encoded")
	for i := range wantLines {
		require.Equal(t, wantLines[i], gotLines[i], "line %d", i+1)
	}
}
