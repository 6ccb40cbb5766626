package store

import (
	"encoding/binary"
	"fmt"
)

// maxDepth bounds the nesting of a stored value. Transcripts are shallow;
// the bound keeps a damaged value from driving the decoder's recursion.
const maxDepth = 256

// checkMsgpack walks one msgpack value in data without decoding it and
// reports ErrCorrupt unless data is exactly one well-formed value whose
// declared lengths fit in the bytes that follow and whose nesting is at most
// maxDepth.
//
// msgpack v5.4.1 preallocates a slice for an array's declared length with
// no limit (its decodeSliceValue tests the alloc-limit flag with "!= 1",
// which is always true), so a damaged length of 2^32 would allocate
// gigabytes before the decoder noticed the input ends. Every element takes
// at least one byte, so bounding the declared counts by the remaining input
// bounds what the decoder allocates by the input's size.
func checkMsgpack(data []byte) error {
	// stack[i] is how many values remain to read at depth i.
	stack := make([]uint64, 1, 16)
	stack[0] = 1
	pos := 0
	pending := uint64(1) // values still to read, all depths together
	for len(stack) > 0 {
		if stack[len(stack)-1] == 0 {
			stack = stack[:len(stack)-1]
			continue
		}
		stack[len(stack)-1]--
		pending--
		if pos >= len(data) {
			return fmt.Errorf("%w: msgpack value truncated at byte %d", ErrCorrupt, pos)
		}
		b := data[pos]
		pos++
		var skip, items uint64 // payload bytes to skip; child values to read
		switch {
		case b <= 0x7f || b >= 0xe0: // fixint
		case b <= 0x8f: // fixmap
			items = 2 * uint64(b&0x0f)
		case b <= 0x9f: // fixarray
			items = uint64(b & 0x0f)
		case b <= 0xbf: // fixstr
			skip = uint64(b & 0x1f)
		default:
			var err error
			if skip, items, pos, err = msgpackHeader(data, pos, b); err != nil {
				return err
			}
		}
		remaining := uint64(len(data) - pos)
		if skip > remaining {
			return fmt.Errorf("%w: msgpack length %d at byte %d exceeds the input", ErrCorrupt, skip, pos)
		}
		pos += int(skip)
		if items > 0 {
			pending += items
			if pending > uint64(len(data)-pos) {
				return fmt.Errorf("%w: msgpack container at byte %d declares more values than the input holds", ErrCorrupt, pos)
			}
			if len(stack) >= maxDepth {
				return fmt.Errorf("%w: msgpack nesting deeper than %d", ErrCorrupt, maxDepth)
			}
			stack = append(stack, items)
		}
	}
	if pos != len(data) {
		return fmt.Errorf("%w: %d bytes after the msgpack value", ErrCorrupt, len(data)-pos)
	}
	return nil
}

// msgpackHeader decodes the header of a non-fix type byte b (data[pos:] is
// what follows it): the payload bytes to skip and the child values to read.
func msgpackHeader(data []byte, pos int, b byte) (skip, items uint64, next int, err error) {
	size := func(n int) (uint64, bool) {
		if pos+n > len(data) {
			return 0, false
		}
		var v uint64
		switch n {
		case 1:
			v = uint64(data[pos])
		case 2:
			v = uint64(binary.BigEndian.Uint16(data[pos:]))
		case 4:
			v = uint64(binary.BigEndian.Uint32(data[pos:]))
		}
		pos += n
		return v, true
	}
	ok := true
	switch b {
	case 0xc0, 0xc2, 0xc3: // nil, false, true
	case 0xcc, 0xd0:
		skip = 1
	case 0xcd, 0xd1:
		skip = 2
	case 0xca, 0xce, 0xd2:
		skip = 4
	case 0xcb, 0xcf, 0xd3:
		skip = 8
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1, 2, 4, 8, 16 plus a type byte
		skip = 1 + 1<<(b-0xd4)
	case 0xc4, 0xd9: // bin8, str8
		skip, ok = size(1)
	case 0xc5, 0xda: // bin16, str16
		skip, ok = size(2)
	case 0xc6, 0xdb: // bin32, str32
		skip, ok = size(4)
	case 0xc7: // ext8
		skip, ok = size(1)
		skip++
	case 0xc8: // ext16
		skip, ok = size(2)
		skip++
	case 0xc9: // ext32
		skip, ok = size(4)
		skip++
	case 0xdc: // array16
		items, ok = size(2)
	case 0xdd: // array32
		items, ok = size(4)
	case 0xde: // map16
		items, ok = size(2)
		items *= 2
	case 0xdf: // map32
		items, ok = size(4)
		items *= 2
	default: // 0xc1 is never used
		return 0, 0, pos, fmt.Errorf("%w: invalid msgpack type byte 0x%02x", ErrCorrupt, b)
	}
	if !ok {
		return 0, 0, pos, fmt.Errorf("%w: msgpack header truncated at byte %d", ErrCorrupt, pos)
	}
	return skip, items, pos, nil
}
