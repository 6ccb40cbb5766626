package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nuid"
	"github.com/vmihailenco/msgpack/v5"
)

// Stored values are frames: one format byte, then msgpack.
//
//	0x01 <msgpack value>                 the value inline
//	0x02 <msgpack chunkManifest>         the value split over chunk keys
//
// A value whose frame would not fit in one message (Config.ChunkSize) is
// written first as chunks under <id>.x.<nonce>.<i>, then the manifest takes
// its place. Chunk keys are unique per write and written before the key
// that references them, so a reader never sees a reference to a chunk that
// was not written, and a writer that fails leaves only unreferenced chunks,
// which the next purge of the id removes.
const (
	frameInline  byte = 0x01
	frameChunked byte = 0x02
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// chunkManifest describes a chunked value.
type chunkManifest struct {
	Prefix string `msgpack:"prefix"` // chunk i is at <prefix>.<i>
	Count  int    `msgpack:"count"`
	Size   int    `msgpack:"size"`
	CRC    uint32 `msgpack:"crc"`
}

// errMissingChunk: a chunk a manifest names is gone. Readers treat it as a
// sign that the value was replaced while they read it, and read again.
var errMissingChunk = errors.New("chunk missing")

// marshal encodes v as msgpack. A struct field without a msgpack tag
// is named by its json tag, as the wire's msgpack names it (bus.Marshal):
// a Go output type stored in a run record or a checkpoint reads back as
// the JSON its run_completed event carried, {"result": 7} and not
// {"Result": 7}.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte(frameInline)
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(&buf)
	enc.SetCustomStructTag("json")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// unmarshal decodes msgpack into v, with interface values as JSON-like
// types (int64, uint64, float64, string, bool, []any, map[string]any), and
// json tags naming the fields that have no msgpack tag, as marshal does.
func unmarshal(data []byte, v any) error {
	if err := checkMsgpack(data); err != nil {
		return err
	}
	dec := msgpack.GetDecoder()
	defer msgpack.PutDecoder(dec)
	dec.Reset(bytes.NewReader(data))
	dec.SetCustomStructTag("json")
	dec.UseLooseInterfaceDecoding(true)
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return nil
}

// encode encodes v as a frame for the bucket, writing chunks under
// chunkPrefix(id) when it is too large for one message. It returns the frame
// and the filter of the chunks it wrote ("" when inline).
func (b *bucket) encode(ctx context.Context, id string, v any) (frame []byte, chunks string, err error) {
	data, err := marshal(v)
	if err != nil {
		return nil, "", fmt.Errorf("%w: encode: %w", ErrBackend, err)
	}
	if len(data) > b.max {
		return nil, "", fmt.Errorf("%w: the encoded value is %d bytes, the limit is %d (Config.MaxValueSize)", ErrTooLarge, len(data), b.max)
	}
	if len(data) <= b.chunk {
		return data, "", nil
	}
	body := data[1:]
	m := chunkManifest{
		Prefix: chunkPrefix(id) + "." + nuid.Next(),
		Count:  (len(body) + b.chunk - 1) / b.chunk,
		Size:   len(body),
		CRC:    crc32.Checksum(body, castagnoli),
	}
	for i := 0; i < m.Count; i++ {
		end := min((i+1)*b.chunk, len(body))
		if _, err := b.put(ctx, m.Prefix+"."+strconv.Itoa(i), body[i*b.chunk:end]); err != nil {
			b.purgeQuietly(ctx, m.Prefix+".>")
			return nil, "", err
		}
	}
	var buf bytes.Buffer
	buf.WriteByte(frameChunked)
	if err := msgpack.NewEncoder(&buf).Encode(&m); err != nil {
		return nil, "", fmt.Errorf("%w: encode: %w", ErrBackend, err)
	}
	return buf.Bytes(), m.Prefix + ".>", nil
}

// decode decodes a frame into v, reading its chunks if it has any. It
// returns the filter of those chunks ("" when inline), for cleanup when the
// value is replaced.
func (b *bucket) decode(ctx context.Context, frame []byte, v any) (chunks string, err error) {
	if len(frame) == 0 {
		return "", fmt.Errorf("%w: empty value", ErrCorrupt)
	}
	switch frame[0] {
	case frameInline:
		return "", unmarshal(frame[1:], v)
	case frameChunked:
	default:
		return "", fmt.Errorf("%w: unknown frame format 0x%02x", ErrCorrupt, frame[0])
	}
	var m chunkManifest
	if err := unmarshal(frame[1:], &m); err != nil {
		return "", err
	}
	if !validChunkPrefix(m.Prefix) || m.Count <= 0 || m.Size < 0 || m.Size > b.max || m.Count > m.Size+1 {
		return "", fmt.Errorf("%w: bad chunk manifest %+v", ErrCorrupt, m)
	}
	body := make([]byte, 0, m.Size)
	for i := 0; i < m.Count; i++ {
		e, err := b.get(ctx, m.Prefix+"."+strconv.Itoa(i))
		if isNotFound(err) {
			return "", fmt.Errorf("%w: %s.%d", errMissingChunk, m.Prefix, i)
		}
		if err != nil {
			return "", err
		}
		if len(body)+len(e.Value()) > m.Size {
			return "", fmt.Errorf("%w: chunks of %s exceed %d bytes", ErrCorrupt, m.Prefix, m.Size)
		}
		body = append(body, e.Value()...)
	}
	if len(body) != m.Size || crc32.Checksum(body, castagnoli) != m.CRC {
		return "", fmt.Errorf("%w: chunks of %s do not match their manifest", ErrCorrupt, m.Prefix)
	}
	return m.Prefix + ".>", unmarshal(body, v)
}

// decodeFrame decodes an inline frame without a bucket (no chunk reads); it
// is what the fuzz target exercises.
func decodeFrame(frame []byte, v any) error {
	if len(frame) == 0 || frame[0] != frameInline {
		return fmt.Errorf("%w: not an inline frame", ErrCorrupt)
	}
	return unmarshal(frame[1:], v)
}

// chunksOf returns the chunk filter a frame references ("" for an inline or
// undecodable frame) without reading the chunks.
func chunksOf(frame []byte) string {
	if len(frame) == 0 || frame[0] != frameChunked {
		return ""
	}
	var m chunkManifest
	if unmarshal(frame[1:], &m) != nil || !validChunkPrefix(m.Prefix) {
		return ""
	}
	return m.Prefix + ".>"
}

// validChunkPrefix reports whether p has the shape encode writes,
// <id>.x.<nonce>, so a damaged manifest can never widen a cleanup purge.
func validChunkPrefix(p string) bool {
	id, rest, ok := strings.Cut(p, ".x.")
	if !ok || !validID(id) || rest == "" {
		return false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// utc returns t in UTC (msgpack decodes times in the local zone); the zero
// time stays zero.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}
