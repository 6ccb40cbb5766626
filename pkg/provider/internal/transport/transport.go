// Package transport builds the HTTP client of the model adapters.
package transport

import (
	"net"
	"net/http"
	"time"
)

// NewClient returns a client with a connection pool of its own: dials and
// TLS handshakes are bounded here; each call is bounded by the adapters'
// watchdog (whole-call timeout and idle limit between stream events).
func NewClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}}
}
