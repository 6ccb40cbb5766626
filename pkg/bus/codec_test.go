package bus_test

import (
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

func TestEncodingOf(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		ct   string
		body []byte
		want bus.Encoding
		err  error
	}{
		{"json header", "application/json", []byte(`{}`), bus.JSON, nil},
		{"json header with charset", "application/json; charset=utf-8", []byte(`{}`), bus.JSON, nil},
		{"msgpack header", "application/msgpack", []byte{0x80}, bus.Msgpack, nil},
		{"header wins over body", "application/msgpack", []byte(`{}`), bus.Msgpack, nil},
		{"sniffed json", "", []byte(" \n{\"a\":1}"), bus.JSON, nil},
		{"sniffed json list", "", []byte(`[]`), bus.JSON, nil},
		{"sniffed fixmap", "", []byte{0x81, 0xa1, 'a', 0x01}, bus.Msgpack, nil},
		{"sniffed map16", "", []byte{0xde, 0, 0}, bus.Msgpack, nil},
		{"sniffed array", "", []byte{0x90}, bus.Msgpack, nil},
		{"unknown header", "text/plain", []byte(`{}`), "", bus.ErrUnknownEncoding},
		{"empty", "", nil, "", bus.ErrUnknownEncoding},
		{"string", "", []byte(`"x"`), "", bus.ErrUnknownEncoding},
		{"msgpack string", "", []byte{0xa1, 'x'}, "", bus.ErrUnknownEncoding},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var h nats.Header
			if tc.ct != "" {
				h = nats.Header{bus.HeaderContentType: {tc.ct}}
			}
			got, err := bus.EncodingOf(h, tc.body)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	require.Equal(t, "application/msgpack", bus.Msgpack.ContentType())
	require.Equal(t, "application/json", bus.JSON.ContentType())
}

// Hostile msgpack must fail fast, not allocate or recurse without bound.
func TestUnmarshalHostileMsgpack(t *testing.T) {
	t.Parallel()
	deep := make([]byte, 0, 2000)
	deep = append(deep, 0x81, 0xa1, 'a')
	for range 1000 {
		deep = append(deep, 0x91)
	}
	deep = append(deep, 0xc0)
	cases := map[string][]byte{
		"array32 claims 4G elements": {0x81, 0xa1, 'a', 0xdd, 0xff, 0xff, 0xff, 0xff},
		"map32 claims 4G pairs":      {0xdf, 0xff, 0xff, 0xff, 0xff},
		"str32 claims 4 GiB":         {0x81, 0xa1, 'a', 0xdb, 0xff, 0xff, 0xff, 0xff},
		"bin32 claims 4 GiB":         {0x81, 0xa1, 'a', 0xc6, 0xff, 0xff, 0xff, 0xff},
		"nested 1000 deep":           deep,
		"extension":                  {0x81, 0xa1, 'a', 0xd6, 0xff, 0, 0, 0, 0},
		"never-used code":            {0x81, 0xa1, 'a', 0xc1},
		"trailing bytes":             {0x80, 0x00},
		"truncated":                  {0x82, 0xa1, 'a'},
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var v map[string]any
			require.ErrorIs(t, bus.Unmarshal(bus.Msgpack, body, &v), bus.ErrMalformed)
			var req bus.RunRequest
			require.ErrorIs(t, bus.Unmarshal(bus.Msgpack, body, &req), bus.ErrMalformed)
		})
	}
}

func TestMarshalDeterministic(t *testing.T) {
	t.Parallel()
	m := map[string]any{"b": 1, "a": 2, "c": map[string]any{"z": 1, "y": 2}}
	first, err := bus.Marshal(bus.Msgpack, m)
	require.NoError(t, err)
	for range 20 {
		again, err := bus.Marshal(bus.Msgpack, m)
		require.NoError(t, err)
		require.Equal(t, first, again)
	}
	_, err = bus.Marshal("xml", m)
	require.ErrorIs(t, err, bus.ErrUnknownEncoding)
}
