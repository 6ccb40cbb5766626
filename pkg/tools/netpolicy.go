package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// Defaults of HTTPPolicy.
const (
	DefaultHTTPMaxBytes = 1 << 20
	DefaultHTTPTimeout  = 20 * time.Second
	maxRedirects        = 5
)

// ErrHostNotAllowed is a URL the policy refuses.
var ErrHostNotAllowed = errors.New("host not allowed")

// HTTPPolicy bounds what http_request and read_page may reach.
//
// With AllowHosts empty any public host is allowed; with entries, only the
// hosts they match: a name ("api.example.com"), a name under a domain
// ("*.example.com"), an IP address ("127.0.0.1") or a CIDR range
// ("10.1.0.0/16"). Addresses in private, loopback, link-local, CGNAT,
// multicast and unspecified ranges are refused unless AllowPrivate is set
// or an entry names the host or its address explicitly (a "*." pattern is
// not explicit). The check is made on the addresses actually dialled, so a
// public name that resolves to a private address is refused too, and on
// every redirect.
type HTTPPolicy struct {
	AllowHosts   []string
	AllowPrivate bool
	// MaxBytes caps the response body read (default 1 MiB).
	MaxBytes int64
	// Timeout bounds one call, redirects included (default 20s).
	Timeout time.Duration
}

// WithDefaults returns p with its zero fields set.
func (p HTTPPolicy) WithDefaults() HTTPPolicy {
	if p.MaxBytes <= 0 {
		p.MaxBytes = DefaultHTTPMaxBytes
	}
	if p.Timeout <= 0 {
		p.Timeout = DefaultHTTPTimeout
	}
	return p
}

// Validate checks the allow-list entries.
func (p HTTPPolicy) Validate() error {
	for _, h := range p.AllowHosts {
		if _, err := netip.ParseAddr(h); err == nil {
			continue
		}
		if strings.Contains(h, "/") {
			if _, err := netip.ParsePrefix(h); err != nil {
				return fmt.Errorf("allow_hosts entry %q: not a CIDR range like 10.0.0.0/8: %v", h, err)
			}
			continue
		}
		name := strings.TrimPrefix(h, "*.")
		if name == "" || strings.ContainsAny(name, " :*@?#[]") {
			return fmt.Errorf("allow_hosts entry %q: give a host name, *.domain, an IP address or a CIDR range (no scheme, port or other wildcard)", h)
		}
	}
	return nil
}

// hostAllowed reports whether the allow-list admits host, and whether it
// names it explicitly.
func (p HTTPPolicy) hostAllowed(host string) (allowed, explicit bool) {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if len(p.AllowHosts) == 0 {
		return true, false
	}
	addr, ipErr := netip.ParseAddr(host)
	isIP := ipErr == nil
	for _, h := range p.AllowHosts {
		h = strings.ToLower(h)
		switch {
		case strings.HasPrefix(h, "*."):
			if strings.HasSuffix(host, h[1:]) {
				allowed = true
			}
		case strings.Contains(h, "/"):
			if pre, err := netip.ParsePrefix(h); err == nil && isIP && pre.Contains(addr.Unmap()) {
				return true, true
			}
		case h == host:
			return true, true
		}
	}
	return allowed, false
}

// addrAllowed reports whether a dialled address is allowed for host.
func (p HTTPPolicy) addrAllowed(host string, addr netip.Addr) bool {
	if p.AllowPrivate || !isPrivate(addr) {
		return true
	}
	if _, explicit := p.hostAllowed(host); explicit {
		return true
	}
	for _, h := range p.AllowHosts {
		if pre, err := netip.ParsePrefix(h); err == nil && pre.Contains(addr.Unmap()) {
			return true
		}
		if a, err := netip.ParseAddr(h); err == nil && a.Unmap() == addr.Unmap() {
			return true
		}
	}
	return false
}

var cgnat = netip.MustParsePrefix("100.64.0.0/10")

func isPrivate(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() || cgnat.Contains(a)
}

// checkURL refuses URLs that are not http(s) or whose host the list does
// not admit.
func (p HTTPPolicy) checkURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%w: %q is not an http or https URL", ErrHostNotAllowed, u.Redacted())
	}
	if u.Hostname() == "" {
		return fmt.Errorf("%w: %q has no host", ErrHostNotAllowed, u.Redacted())
	}
	if ok, _ := p.hostAllowed(u.Hostname()); !ok {
		return fmt.Errorf("%w: %s is not in this agent's http allow_hosts (%s)", ErrHostNotAllowed, u.Hostname(), strings.Join(p.AllowHosts, ", "))
	}
	return nil
}

// client returns an HTTP client that enforces p on every dial and
// redirect.
func (p HTTPPolicy) client() *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	tr := &http.Transport{
		Proxy:               nil,
		DisableKeepAlives:   true, // a tool holds no idle connections between calls
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        4,
		IdleConnTimeout:     30 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(address)
			if err != nil {
				return nil, err
			}
			ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
			if err != nil {
				return nil, err
			}
			var lastErr error
			for _, ip := range ips {
				if !p.addrAllowed(host, ip) {
					lastErr = fmt.Errorf("%w: %s resolves to %s, a private or local address (list it in the agent's http allow_hosts to reach it)", ErrHostNotAllowed, host, ip.Unmap())
					continue
				}
				c, err := dialer.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
				if err == nil {
					return c, nil
				}
				lastErr = err
			}
			if lastErr == nil {
				lastErr = fmt.Errorf("%s has no address", host)
			}
			return nil, lastErr
		},
	}
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			return p.checkURL(req.URL)
		},
	}
}

// readBody reads at most max bytes of r; truncated reports more.
func readBody(r io.Reader, max int64) ([]byte, bool, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(b)) > max {
		return b[:max], true, nil
	}
	return b, false, nil
}
