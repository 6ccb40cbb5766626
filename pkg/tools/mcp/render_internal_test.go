package mcp

import (
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

func TestRender(t *testing.T) {
	size := int64(3)
	for name, tc := range map[string]struct {
		res  *sdk.CallToolResult
		want any
	}{
		"texts join as one string": {
			&sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a"}, &sdk.TextContent{Text: "b"}}},
			"a\nb",
		},
		"no content: the structured content": {
			&sdk.CallToolResult{StructuredContent: map[string]any{"t": 21.5}},
			map[string]any{"t": 21.5},
		},
		"empty": {&sdk.CallToolResult{}, ""},
		"a text resource and a resource link stay text": {
			&sdk.CallToolResult{Content: []sdk.Content{
				&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "demo://a", Text: "body"}},
				&sdk.ResourceLink{URI: "demo://b", Name: "b.txt", MIMEType: "text/plain", Size: &size, Description: "the b file"},
			}},
			"body\n[resource b.txt: demo://b, text/plain — the b file]",
		},
		"image, audio and blob are parts": {
			&sdk.CallToolResult{Content: []sdk.Content{
				&sdk.TextContent{Text: "look"},
				&sdk.ImageContent{Data: []byte("png"), MIMEType: "image/png"},
				&sdk.AudioContent{Data: []byte("wav"), MIMEType: "audio/wav"},
				&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "demo://z", MIMEType: "application/gzip", Blob: []byte("gz")}},
			}},
			[]loop.Part{
				{Type: loop.PartText, Text: "look"},
				{Type: loop.PartImage, Data: "cG5n", MimeType: "image/png"},
				{Type: loop.PartFile, Data: "d2F2", MimeType: "audio/wav", Filename: "audio"},
				{Type: loop.PartFile, Data: "Z3o=", MimeType: "application/gzip", Filename: "demo://z"},
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.want, render(tc.res))
		})
	}
}

func TestExpand(t *testing.T) {
	env := map[string]string{"A": "1", "B_2": "two"}
	get := func(k string) string { return env[k] }
	out, err := expand("x${A}y${B_2}z$A", get)
	require.NoError(t, err)
	require.Equal(t, "x1ytwoz$A", out)
	_, err = expand("${A}${NOPE}${ALSO}", get)
	require.ErrorIs(t, err, ErrUnsetVariable)
	require.ErrorContains(t, err, "NOPE, ALSO")
}
