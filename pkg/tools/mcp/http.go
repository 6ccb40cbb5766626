package mcp

import (
	"net/http"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// httpTransport is the streamable HTTP transport with the server's
// headers on every request.
func httpTransport(url string, headers map[string]string) sdk.Transport {
	client := &http.Client{Transport: headerTransport{headers: headers, next: http.DefaultTransport}}
	return &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: client}
}

type headerTransport struct {
	headers map[string]string
	next    http.RoundTripper
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h.headers {
			r.Header.Set(k, v)
		}
	}
	return h.next.RoundTrip(r)
}
