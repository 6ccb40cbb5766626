package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

// heldDeliveries returns n holdings as a worker of the test fleet's
// agents records them: API run ids, the ack subjects of deliveries of a
// few agents' consumers.
func heldDeliveries(n int) []Holding {
	runs := make([]Holding, n)
	for i := range runs {
		seq := uint64(1_000_000 + i)
		runs[i] = Holding{
			RunID:   fmt.Sprintf("run_01JDZX%020d", i),
			Ack:     fmt.Sprintf("$JS.ACK.LOVIA_RUNS.lovia_agent_agent%d.%d.%d.%d.1764620000%09d.%d", i%3, 1+i%2, seq, 900_000+i, i, i%50),
			Seq:     seq,
			Attempt: 1 + i%2,
		}
	}
	return runs
}

// TestHoldingsCodec: a record decodes to the holdings it was encoded
// from, whatever their ack subjects look like (the two ack formats of
// the server, short and empty ones), at about half the bytes of the JSON
// records of earlier releases.
func TestHoldingsCodec(t *testing.T) {
	t.Parallel()
	runs := append(heldDeliveries(50),
		Holding{RunID: "v2", Ack: "$JS.ACK.hub.ACCHASH.LOVIA_RUNS.lovia_agent_calc.1.5.6.1764620000000000000.0.tok", Seq: 5},
		Holding{RunID: "short", Ack: "$JS.ACK.a", Attempt: 3},
		Holding{RunID: "empty"},
		Holding{RunID: "dots", Ack: "....."},
	)
	back, err := decodeHoldings(encodeHoldings(runs))
	require.NoError(t, err)
	require.Equal(t, runs, back)

	back, err = decodeHoldings(encodeHoldings(nil))
	require.NoError(t, err)
	require.Empty(t, back)

	typical := heldDeliveries(1000)
	val := encodeHoldings(typical)
	legacy, err := json.Marshal(holdingsValue{Runs: typical}) // as earlier releases wrote it
	require.NoError(t, err)
	require.Less(t, len(val)/len(typical), 90, "bytes a run")
	require.Less(t, len(val)*10, len(legacy)*6, "the record against the JSON one (%d against %d bytes)", len(val), len(legacy))
}

// TestHoldingsRefusesWhatItCannotRead: a record of a later version, an
// unknown format, a prefix index out of range and an empty value are
// corrupt, each with a message naming what is wrong.
func TestHoldingsRefusesWhatItCannotRead(t *testing.T) {
	t.Parallel()
	for name, val := range map[string][]byte{
		"version 3":      {frameInline, 0x93, 0x03, 0x90, 0x90},
		"unknown format": {0x07, 0x01},
		"prefix 1 of 0":  {frameInline, 0x93, 0x02, 0x90, 0x91, 0x95, 0xa1, 'r', 0x01, 0xa0, 0x00, 0x00},
		"empty":          nil,
		"short run":      {frameInline, 0x93, 0x02, 0x90, 0x91, 0x92, 0xa1, 'r', 0x00},
	} {
		_, err := decodeHoldings(val)
		require.ErrorIs(t, err, ErrCorrupt, name)
	}
	_, err := decodeHoldings([]byte{frameInline, 0x93, 0x03, 0x90, 0x90})
	require.ErrorContains(t, err, "version 3")
}

// TestHoldingsOfManyRuns: a worker holding 10,000 runs records them in
// one message under the server's default max payload (1 MB; the JSON
// record of earlier releases took 1.4 MB and was refused, so a takeover
// fell back to the ack wait), and one holding too many for it gets an
// error that says what to do.
func TestHoldingsOfManyRuns(t *testing.T) {
	t.Parallel()
	_, st := newStore(t, Config{})
	ctx := context.Background()
	c := st.Control()
	runs := heldDeliveries(10_000)
	_, err := c.SetHoldings(ctx, "w1", runs)
	require.NoError(t, err)
	read, err := c.ReadHoldings(ctx, "w1")
	require.NoError(t, err)
	require.Equal(t, runs, read.Runs)
	owned, err := c.Owned(ctx, runs[9_999].RunID)
	require.NoError(t, err)
	require.True(t, owned)

	_, err = c.SetHoldings(ctx, "w1", heldDeliveries(20_000))
	require.ErrorIs(t, err, nats.ErrMaxPayload)
	require.ErrorContains(t, err, "max_payload")
	require.ErrorContains(t, err, "concurrency")
	read, err = c.ReadHoldings(ctx, "w1")
	require.NoError(t, err)
	require.Len(t, read.Runs, 10_000, "the refused write left the record as it was")
}

// TestHoldingsOfAnEarlierRelease: a JSON record written by an earlier
// release is read (a survivor of this release takes over from a worker
// of the earlier one during an upgrade).
func TestHoldingsOfAnEarlierRelease(t *testing.T) {
	t.Parallel()
	_, st := newStore(t, Config{})
	ctx := context.Background()
	runs := heldDeliveries(3)
	legacy, err := json.Marshal(holdingsValue{Runs: runs}) // as earlier releases wrote it
	require.NoError(t, err)
	rev, err := st.Control().b.put(ctx, holdingsKey("old"), legacy)
	require.NoError(t, err)
	read, err := st.Control().ReadHoldings(ctx, "old")
	require.NoError(t, err)
	require.Equal(t, Holdings{Worker: "old", Runs: runs, Revision: rev}, read)
	owned, err := st.Control().Owned(ctx, runs[1].RunID)
	require.NoError(t, err)
	require.True(t, owned)
}

// TestHoldingsCodecIsMsgpack: the hand-written appenders write what the
// msgpack encoder writes, at every length and integer boundary.
func TestHoldingsCodecIsMsgpack(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 15, 16, 65535, 65536} {
		var want bytes.Buffer
		require.NoError(t, msgpack.NewEncoder(&want).EncodeArrayLen(n))
		require.Equal(t, want.Bytes(), mpArray(nil, n), "array of %d", n)
	}
	for _, n := range []int{0, 31, 32, 255, 256, 65535, 65536} {
		s := strings.Repeat("x", n)
		var want bytes.Buffer
		require.NoError(t, msgpack.NewEncoder(&want).EncodeString(s))
		require.Equal(t, want.Bytes(), mpString(nil, s), "string of %d", n)
	}
	for _, v := range []int64{0, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64, -1, -32, -33, -128, -129, -32768, -32769, math.MinInt32, math.MinInt32 - 1, math.MinInt64} {
		var want bytes.Buffer
		require.NoError(t, msgpack.NewEncoder(&want).EncodeInt(v))
		require.Equal(t, want.Bytes(), mpInt(nil, v), "int %d", v)
		if v >= 0 {
			want.Reset()
			require.NoError(t, msgpack.NewEncoder(&want).EncodeUint(uint64(v)))
			require.Equal(t, want.Bytes(), mpUint(nil, uint64(v)), "uint %d", v)
		}
	}
	var want bytes.Buffer
	require.NoError(t, msgpack.NewEncoder(&want).EncodeUint(math.MaxUint64))
	require.Equal(t, want.Bytes(), mpUint(nil, math.MaxUint64))
}
