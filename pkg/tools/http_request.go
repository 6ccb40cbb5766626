package tools

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// HTTPRequestName is the http_request tool's name.
const HTTPRequestName = "http_request"

type httpIn struct {
	Method  string            `json:"method,omitempty" desc:"HTTP method (default GET)." jsonschema:"enum=GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS"`
	URL     string            `json:"url" desc:"Absolute http or https URL." jsonschema:"minLength=1,maxLength=8192"`
	Headers map[string]string `json:"headers,omitempty" desc:"Request headers."`
	Body    string            `json:"body,omitempty" desc:"Request body (text)."`
}

// HTTPResponse is http_request's result.
type HTTPResponse struct {
	Status    int               `json:"status"`
	Headers   map[string]string `json:"headers"`
	Body      string            `json:"body"`
	Truncated bool              `json:"truncated,omitempty"`
}

// HTTPRequest returns the http_request tool under policy p (see
// [HTTPPolicy]). The model gets the status line, the response headers and
// the body as text, capped at p.MaxBytes; a refused host, a network error
// or a timeout is an error result saying which.
func HTTPRequest(p HTTPPolicy) *loop.Tool {
	p = p.WithDefaults()
	c := p.client()
	return loop.NewTool(HTTPRequestName,
		"Make an HTTP request and return the status, headers and body (text, capped). Only the hosts this agent is allowed to reach work.",
		func(ctx context.Context, _ *loop.RunContext, in httpIn) (HTTPResponse, error) {
			method := in.Method
			if method == "" {
				method = http.MethodGet
			}
			resp, body, truncated, err := fetch(ctx, c, p, method, in.URL, in.Headers, in.Body)
			if err != nil {
				return HTTPResponse{}, err
			}
			out := HTTPResponse{Status: resp.StatusCode, Headers: map[string]string{}, Truncated: truncated}
			for k := range resp.Header {
				out.Headers[k] = resp.Header.Get(k)
			}
			if utf8.Valid(body) {
				out.Body = string(body)
			} else {
				out.Body = fmt.Sprintf("[%d bytes of %s, not text]", len(body), resp.Header.Get("Content-Type"))
			}
			return out, nil
		},
		loop.WithRenderer(func(v any) (string, error) {
			r, ok := v.(HTTPResponse)
			if !ok {
				return "", fmt.Errorf("http_request: unexpected result %T", v)
			}
			return renderHTTP(r, p.MaxBytes), nil
		}),
		loop.WithMaxOutputChars(-1),
	)
}

func renderHTTP(r HTTPResponse, max int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP %d %s\n", r.Status, http.StatusText(r.Status))
	keys := make([]string, 0, len(r.Headers))
	for k := range r.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\n", k, r.Headers[k])
	}
	b.WriteString("\n")
	b.WriteString(r.Body)
	if r.Truncated {
		fmt.Fprintf(&b, "\n[body truncated at %d bytes]", max)
	}
	return b.String()
}

// fetch makes one request under p; the body is read and closed.
func fetch(ctx context.Context, c *http.Client, p HTTPPolicy, method, rawURL string, headers map[string]string, body string) (*http.Response, []byte, bool, error) {
	u, err := url.Parse(rawURL)
	if err != nil || !u.IsAbs() {
		return nil, nil, false, &loop.ToolError{Message: fmt.Sprintf("url %q is not an absolute http(s) URL like https://example.com/page", rawURL)}
	}
	if err := p.checkURL(u); err != nil {
		return nil, nil, false, &loop.ToolError{Message: err.Error(), Cause: err}
	}
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	var rd *strings.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	var req *http.Request
	if rd != nil {
		req, err = http.NewRequestWithContext(ctx, method, u.String(), rd)
	} else {
		req, err = http.NewRequestWithContext(ctx, method, u.String(), nil)
	}
	if err != nil {
		return nil, nil, false, &loop.ToolError{Message: fmt.Sprintf("bad request: %v", err)}
	}
	req.Header.Set("User-Agent", "lovia-fleet")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, false, requestError(ctx, p, u, err)
	}
	defer resp.Body.Close()
	data, truncated, err := readBody(resp.Body, p.MaxBytes)
	if err != nil {
		return nil, nil, false, requestError(ctx, p, u, err)
	}
	return resp, data, truncated, nil
}

func requestError(ctx context.Context, p HTTPPolicy, u *url.URL, err error) error {
	switch {
	case errors.Is(err, ErrHostNotAllowed):
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return &loop.ToolError{Message: strings.TrimPrefix(err.Error(), "dial tcp: "), Cause: ErrHostNotAllowed}
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return &loop.ToolError{Message: fmt.Sprintf("request to %s timed out after %s", u.Host, p.Timeout), Cause: err}
	default:
		return &loop.ToolError{Message: fmt.Sprintf("request to %s failed: %v", u.Host, err), Cause: err}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
