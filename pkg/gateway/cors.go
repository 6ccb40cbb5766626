package gateway

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Cross-origin requests from browsers (CORS). A gateway without
// Config.CORSOrigins sets no CORS headers: browsers then refuse to let pages
// of other origins read its replies, which is the safe default.

const (
	corsMethods = "GET, POST, DELETE, OPTIONS"
	// Last-Event-ID is what an EventSource sends when it reconnects.
	corsHeaders = "Authorization, Content-Type, Last-Event-ID"
	// Lovia-Run-Id names the run a POST /v1/runs accepted.
	corsExpose = "Lovia-Run-Id, WWW-Authenticate"
	corsMaxAge = "600"
)

// TypeForbidden is a cross-origin preflight from an origin the gateway does
// not allow (403).
const TypeForbidden = "Forbidden"

// validOrigin reports why o is not "*" or a scheme://host[:port] origin.
func validOrigin(o string) error {
	if o == "*" {
		return nil
	}
	u, err := url.Parse(o)
	switch {
	case err != nil:
		return err
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q is not an origin: write http(s)://host[:port], like https://app.example.com", o)
	case u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("%q is not an origin: write http(s)://host[:port] without a path, like https://app.example.com", o)
	}
	return nil
}

// normalizeOrigin lower-cases an origin and drops a trailing slash, the
// form browsers send in the Origin header.
func normalizeOrigin(o string) string {
	return strings.TrimSuffix(strings.ToLower(o), "/")
}

// allowedOrigin reports whether requests from origin may read replies.
func (g *Gateway) allowedOrigin(origin string) bool {
	return slices.Contains(g.origins, "*") || slices.Contains(g.origins, normalizeOrigin(origin))
}

// cors sets the CORS headers of a request from a browser and answers its
// preflight. It reports whether the request was answered.
func (g *Gateway) cors(w http.ResponseWriter, r *http.Request) bool {
	if len(g.origins) == 0 {
		return false
	}
	h := w.Header()
	h.Add("Vary", "Origin")
	origin := r.Header.Get("Origin")
	preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
	if origin == "" {
		return false
	}
	if !g.allowedOrigin(origin) {
		if preflight {
			g.fail(w, r, newError(http.StatusForbidden, TypeForbidden,
				fmt.Sprintf("origin %s may not call this gateway", origin),
				"add it to the gateway's allowed origins (--cors-origin "+origin+")"))
			return true
		}
		return false // no CORS headers: the browser withholds the reply
	}
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Expose-Headers", corsExpose)
	if !preflight {
		return false
	}
	// Preflights carry no credentials: they are answered before the
	// bearer token check.
	h.Set("Access-Control-Allow-Methods", corsMethods)
	h.Set("Access-Control-Allow-Headers", corsHeaders)
	h.Set("Access-Control-Max-Age", corsMaxAge)
	w.WriteHeader(http.StatusNoContent)
	return true
}
