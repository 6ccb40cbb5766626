package store

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

func TestCheckMsgpack(t *testing.T) {
	t.Parallel()
	valid := []any{
		nil, true, 1, -1, 300, -300, 1 << 40, 1.5, float32(2.5), "", "short", string(make([]byte, 70000)),
		[]byte{1, 2}, make([]byte, 300), []any{}, []any{1, "a", []any{nil}}, map[string]any{"a": map[string]any{"b": []any{1}}},
		&batchRecord{Prev: "p", Base: 1, Entries: []loop.Entry{loop.UserText("x"), {Kind: loop.KindToolResult, Raw: []byte(`{}`)}}},
		&headRecord{Head: loop.RunHead{Output: map[string]any{"x": 1.5}}},
	}
	for _, v := range valid {
		b, err := msgpack.Marshal(v)
		require.NoError(t, err)
		require.NoError(t, checkMsgpack(b), "%#v", v)
	}
	for name, b := range map[string][]byte{
		"empty":              {},
		"huge array":         {0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0},
		"huge map":           {0xdf, 0x7f, 0xff, 0xff, 0xff},
		"huge str":           {0xdb, 0xff, 0xff, 0xff, 0xff, 'a'},
		"array past the end": {0x93, 0x01, 0x02},
		"truncated header":   {0xcd, 0x01},
		"trailing bytes":     {0x01, 0x02},
		"never used":         {0xc1},
		"too deep":           append(make([]byte, 0, 300), deep(300)...),
	} {
		require.ErrorIs(t, checkMsgpack(b), ErrCorrupt, name)
	}
}

func deep(n int) []byte {
	b := make([]byte, n+1)
	for i := range n {
		b[i] = 0x91 // fixarray of one
	}
	b[n] = 0xc0
	return b
}
