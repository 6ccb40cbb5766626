package bus

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Limits of checkMsgpack.
const (
	// maxDepth is the deepest nesting of arrays and maps a body may have.
	maxDepth = 64
	// maxCollection is the most elements one array or map may hold. It
	// bounds what the decoder preallocates for a length prefix.
	maxCollection = 1 << 16
)

var errTruncated = errors.New("msgpack: truncated")

// isMsgpackMap reports whether c starts a msgpack map.
func isMsgpackMap(c byte) bool { return c&0xf0 == 0x80 || c == 0xde || c == 0xdf }

// isMsgpackArray reports whether c starts a msgpack array.
func isMsgpackArray(c byte) bool { return c&0xf0 == 0x90 || c == 0xdc || c == 0xdd }

// checkMsgpack verifies, without allocating per element, that b is exactly
// one well-formed msgpack value: every length fits in the bytes that
// remain, arrays and maps hold at most maxCollection elements and nest at
// most maxDepth deep, and no extension types occur (the wire format has
// none; times are RFC 3339 strings). The msgpack decoder preallocates
// slices and maps from length prefixes, so this check is what keeps a
// hostile 10-byte body from asking for gigabytes.
func checkMsgpack(b []byte) error {
	// pending[i] is the number of values still to read at depth i.
	var pending [maxDepth + 1]uint64
	depth := 0
	pending[0] = 1
	pos := 0
	for {
		for depth >= 0 && pending[depth] == 0 {
			depth--
		}
		if depth < 0 {
			break
		}
		pending[depth]--
		if pos >= len(b) {
			return errTruncated
		}
		c := b[pos]
		pos++
		var (
			skip  uint64 // payload bytes to skip
			items uint64 // values nested in this one
			nest  bool
		)
		switch {
		case c <= 0x7f, c >= 0xe0: // fixint
		case c&0xf0 == 0x80: // fixmap
			items, nest = 2*uint64(c&0x0f), true
		case c&0xf0 == 0x90: // fixarray
			items, nest = uint64(c&0x0f), true
		case c&0xe0 == 0xa0: // fixstr
			skip = uint64(c & 0x1f)
		default:
			var n uint64
			var err error
			switch c {
			case 0xc0, 0xc2, 0xc3: // nil, false, true
			case 0xc4, 0xd9: // bin8, str8
				n, pos, err = readLen(b, pos, 1)
				skip = n
			case 0xc5, 0xda: // bin16, str16
				n, pos, err = readLen(b, pos, 2)
				skip = n
			case 0xc6, 0xdb: // bin32, str32
				n, pos, err = readLen(b, pos, 4)
				skip = n
			case 0xca: // float32
				skip = 4
			case 0xcb: // float64
				skip = 8
			case 0xcc, 0xd0: // uint8, int8
				skip = 1
			case 0xcd, 0xd1:
				skip = 2
			case 0xce, 0xd2:
				skip = 4
			case 0xcf, 0xd3:
				skip = 8
			case 0xdc: // array16
				n, pos, err = readLen(b, pos, 2)
				items, nest = n, true
			case 0xdd: // array32
				n, pos, err = readLen(b, pos, 4)
				items, nest = n, true
			case 0xde: // map16
				n, pos, err = readLen(b, pos, 2)
				items, nest = 2*n, true
			case 0xdf: // map32
				n, pos, err = readLen(b, pos, 4)
				items, nest = 2*n, true
			case 0xc7, 0xc8, 0xc9, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
				return fmt.Errorf("msgpack: extension type at byte %d is not allowed", pos-1)
			default: // 0xc1 is never used
				return fmt.Errorf("msgpack: invalid code 0x%02x at byte %d", c, pos-1)
			}
			if err != nil {
				return err
			}
		}
		if skip > uint64(len(b)-pos) {
			return errTruncated
		}
		pos += int(skip)
		if !nest || items == 0 {
			continue
		}
		if items > 2*maxCollection {
			return fmt.Errorf("msgpack: collection of %d values exceeds %d", items, 2*maxCollection)
		}
		// Every value takes at least one byte.
		if items > uint64(len(b)-pos) {
			return errTruncated
		}
		if depth+1 > maxDepth {
			return fmt.Errorf("msgpack: nesting deeper than %d", maxDepth)
		}
		depth++
		pending[depth] = items
	}
	if pos != len(b) {
		return fmt.Errorf("msgpack: %d trailing bytes", len(b)-pos)
	}
	return nil
}

func readLen(b []byte, pos, size int) (uint64, int, error) {
	if len(b)-pos < size {
		return 0, pos, errTruncated
	}
	switch size {
	case 1:
		return uint64(b[pos]), pos + 1, nil
	case 2:
		return uint64(binary.BigEndian.Uint16(b[pos:])), pos + 2, nil
	default:
		return uint64(binary.BigEndian.Uint32(b[pos:])), pos + 4, nil
	}
}
