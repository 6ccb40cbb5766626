package classify

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Transport classifies a failure without an HTTP response: connection
// resets, refused connections, timeouts and cut streams are retryable; a
// host that does not resolve or a certificate that does not verify is not.
func (ep Endpoint) Transport(err error) error {
	pe := &loop.ProviderError{
		Message:   fmt.Sprintf("%s: request to %s failed: %v", ep.Vendor, ep.BaseURL, err),
		Vendor:    ep.Vendor,
		Model:     ep.Model,
		Retryable: loop.Retryable,
		Hint:      fmt.Sprintf("check the network, any proxy and the base URL %s (%s); the loop's retry policy retries it", ep.BaseURL, ep.BaseURLEnv),
		Cause:     err,
	}
	var (
		dns      *net.DNSError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		verify   *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &dns) && dns.IsNotFound:
		pe.Retryable = loop.NotRetryable
		pe.Hint = fmt.Sprintf("the host of %s does not resolve: fix %s (or the adapter's BaseURL)", ep.BaseURL, ep.BaseURLEnv)
	case errors.As(err, &unknown), errors.As(err, &hostname), errors.As(err, &verify):
		pe.Retryable = loop.NotRetryable
		pe.Hint = fmt.Sprintf("the TLS certificate of %s does not verify: fix the base URL (%s) or the HTTP client's trust roots", ep.BaseURL, ep.BaseURLEnv)
	case errors.Is(err, syscall.ECONNREFUSED):
		pe.Hint = fmt.Sprintf("nothing accepts connections at %s: start the server or fix %s; the loop's retry policy retries it", ep.BaseURL, ep.BaseURLEnv)
	}
	return pe
}

// Timeout is the retryable error of a call the watchdog ended: op names the
// operation, limit the limit that was exceeded and cause the watchdog's.
func (ep Endpoint) Timeout(op string, limit time.Duration, cause error) error {
	return &loop.ProviderError{
		Message:   fmt.Sprintf("%s: %s to %s timed out after %s (%v)", ep.Vendor, op, ep.BaseURL, limit, cause),
		Hint:      "the endpoint is slow or stalled: the loop retries the turn; raise the adapter's Timeout or IdleTimeout for slow models",
		Vendor:    ep.Vendor,
		Model:     ep.Model,
		Retryable: loop.Retryable,
		Cause:     cause,
	}
}
