package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
)

// A holdings record's value is a frame (frameInline) holding the msgpack
// array
//
//	[2, [prefix…], [[run, prefix index, ack rest, seq, attempt]…]]
//
// where a delivery's ack subject is its prefix followed by its rest. The
// rest is the subject's last five tokens, the delivery's own numbers
// ($JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<time>.<pending>;
// in the server's newer format, with a domain and an account hash before
// the stream and a token at the end, the delivery count stays in the
// prefix): the prefix is shared by the deliveries of one consumer and
// stored once. About 80 bytes a run instead of the 150 of the JSON
// records of earlier releases ({"runs":[{"run","ack","seq","attempt"}…]}),
// which are still read.
const holdingsVersion = 2

// ackRestDots is how many of an ack subject's last dots start its rest.
const ackRestDots = 5

// splitAck splits an ack subject into the prefix its consumer's
// deliveries share and the rest; a subject with fewer dots is all rest.
func splitAck(ack string) (prefix, rest string) {
	i := len(ack)
	for range ackRestDots {
		i = strings.LastIndexByte(ack[:i], '.')
		if i < 0 {
			return "", ack
		}
	}
	return ack[:i+1], ack[i+1:]
}

// encodeHoldings encodes runs as a holdings record's value, appending
// msgpack by hand (it is rewritten at every claim a worker makes).
func encodeHoldings(runs []Holding) []byte {
	var prefixes []string
	// Each run's ack subject: the index of its prefix, and its rest.
	acks := make([]struct {
		prefix int
		rest   string
	}, len(runs))
	size := 16
	for i, h := range runs {
		p, rest := splitAck(h.Ack)
		j := len(prefixes) - 1
		for ; j >= 0 && prefixes[j] != p; j-- {
		}
		if j < 0 {
			j = len(prefixes)
			prefixes = append(prefixes, p)
			size += len(p) + 5
		}
		acks[i].prefix, acks[i].rest = j, rest
		size += len(h.RunID) + len(rest) + 30
	}
	b := make([]byte, 0, size)
	b = append(b, frameInline)
	b = mpArray(b, 3)
	b = mpUint(b, holdingsVersion)
	b = mpArray(b, len(prefixes))
	for _, p := range prefixes {
		b = mpString(b, p)
	}
	b = mpArray(b, len(runs))
	for i, h := range runs {
		b = mpArray(b, 5)
		b = mpString(b, h.RunID)
		b = mpUint(b, uint64(acks[i].prefix))
		b = mpString(b, acks[i].rest)
		b = mpUint(b, h.Seq)
		b = mpInt(b, int64(h.Attempt))
	}
	return b
}

// mpArray appends a msgpack array header of n elements.
func mpArray(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x90|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xdc), uint16(n))
	default:
		return binary.BigEndian.AppendUint32(append(b, 0xdd), uint32(n))
	}
}

// mpString appends a msgpack string.
func mpString(b []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

// mpUint appends a msgpack unsigned integer in its shortest form.
func mpUint(b []byte, v uint64) []byte {
	switch {
	case v < 128:
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(v))
	default:
		return binary.BigEndian.AppendUint64(append(b, 0xcf), v)
	}
}

// mpInt appends a msgpack integer in its shortest form.
func mpInt(b []byte, v int64) []byte {
	switch {
	case v >= 0:
		return mpUint(b, uint64(v))
	case v >= -32:
		return append(b, byte(v))
	case v >= math.MinInt8:
		return append(b, 0xd0, byte(v))
	case v >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(v))
	case v >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(v))
	default:
		return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(v))
	}
}

// decodeHoldings decodes a holdings record's value, of this release or
// (JSON) an earlier one. A value of a later version is refused, not
// guessed at.
func decodeHoldings(val []byte) ([]Holding, error) {
	if len(val) == 0 {
		return nil, fmt.Errorf("%w: empty holdings record", ErrCorrupt)
	}
	if val[0] == '{' {
		var v holdingsValue
		if err := json.Unmarshal(val, &v); err != nil {
			return nil, fmt.Errorf("%w: holdings record: %w", ErrCorrupt, err)
		}
		return v.Runs, nil
	}
	if val[0] != frameInline {
		return nil, fmt.Errorf("%w: holdings record: unknown format 0x%02x", ErrCorrupt, val[0])
	}
	body := val[1:]
	if err := checkMsgpack(body); err != nil {
		return nil, fmt.Errorf("holdings record: %w", err)
	}
	dec := msgpack.GetDecoder()
	defer msgpack.PutDecoder(dec)
	dec.Reset(bytes.NewReader(body))
	// checkMsgpack bounded every count by the bytes that follow it.
	arrayLen := func(what string, atLeast int) (int, error) {
		n, err := dec.DecodeArrayLen()
		if err != nil {
			return 0, fmt.Errorf("%w: holdings record: %s: %w", ErrCorrupt, what, err)
		}
		if n < atLeast {
			return 0, fmt.Errorf("%w: holdings record: %s has %d elements", ErrCorrupt, what, n)
		}
		return n, nil
	}
	if _, err := arrayLen("record", 3); err != nil {
		return nil, err
	}
	version, err := dec.DecodeUint64()
	if err != nil {
		return nil, fmt.Errorf("%w: holdings record: version: %w", ErrCorrupt, err)
	}
	if version != holdingsVersion {
		return nil, fmt.Errorf("%w: holdings record version %d, this release reads version %d (written by a later release?)", ErrCorrupt, version, holdingsVersion)
	}
	np, err := arrayLen("prefixes", 0)
	if err != nil {
		return nil, err
	}
	prefixes := make([]string, 0, min(np, 64))
	for range np {
		p, err := dec.DecodeString()
		if err != nil {
			return nil, fmt.Errorf("%w: holdings record: prefix: %w", ErrCorrupt, err)
		}
		prefixes = append(prefixes, p)
	}
	nr, err := arrayLen("runs", 0)
	if err != nil {
		return nil, err
	}
	runs := make([]Holding, 0, min(nr, len(body)/8))
	for range nr {
		fields, err := arrayLen("run", 5)
		if err != nil {
			return nil, err
		}
		var h Holding
		var idx uint64
		var rest string
		var attempt int64
		if h.RunID, err = dec.DecodeString(); err == nil {
			if idx, err = dec.DecodeUint64(); err == nil {
				if rest, err = dec.DecodeString(); err == nil {
					if h.Seq, err = dec.DecodeUint64(); err == nil {
						attempt, err = dec.DecodeInt64()
					}
				}
			}
		}
		for i := 5; err == nil && i < fields; i++ {
			err = dec.Skip() // a later release's fields
		}
		if err != nil {
			return nil, fmt.Errorf("%w: holdings record: run: %w", ErrCorrupt, err)
		}
		if idx >= uint64(len(prefixes)) {
			return nil, fmt.Errorf("%w: holdings record: run %q names prefix %d of %d", ErrCorrupt, h.RunID, idx, len(prefixes))
		}
		h.Ack = prefixes[idx] + rest
		h.Attempt = int(attempt)
		runs = append(runs, h)
	}
	return runs, nil
}
