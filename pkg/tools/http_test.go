package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

// webServer is a real HTTP server on loopback.
func webServer(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("X-Seen", r.Header.Get("X-Token"))
		fmt.Fprintf(w, "%s %s", r.Method, b)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat("a", 3000)))
	})
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // until the client gives up
	})
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><html><head><title>Release notes</title><style>p{color:red}</style><script>var x = "hidden";</script></head>
<body><nav><a href="/">Home</a> | <a href="/blog">Blog</a></nav>
<main><h1>Version 2</h1><p>Faster   runs and
 fewer <b>surprises</b>.</p><ul><li>One</li><li>Two</li></ul></main></body></html>`)
	})
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"a":1}`)
	})
	mux.HandleFunc("/missing", http.NotFound)
	srv := httptest.NewServer(mux)
	mux.HandleFunc("/redirect-out", func(w http.ResponseWriter, r *http.Request) {
		u, _ := url.Parse(srv.URL)
		http.Redirect(w, r, "http://localhost:"+u.Port()+"/echo", http.StatusFound)
	})
	t.Cleanup(srv.Close)
	return srv
}

func callHTTP(t *testing.T, tool *loop.Tool, args map[string]any) (string, error) {
	t.Helper()
	raw, err := json.Marshal(args)
	require.NoError(t, err)
	v, err := tool.Func(context.Background(), &loop.RunContext{}, raw)
	if err != nil {
		return "", err
	}
	if tool.Render != nil {
		return tool.Render(v)
	}
	s, _ := v.(string)
	return s, nil
}

func TestHTTPRequest(t *testing.T) {
	t.Parallel()
	srv := webServer(t)
	loopback := HTTPPolicy{AllowHosts: []string{"127.0.0.1"}}

	t.Run("private_addresses_refused_by_default", func(t *testing.T) {
		t.Parallel()
		_, err := callHTTP(t, HTTPRequest(HTTPPolicy{}), map[string]any{"url": srv.URL + "/echo"})
		require.ErrorIs(t, err, ErrHostNotAllowed)
		require.ErrorContains(t, err, "resolves to 127.0.0.1, a private or local address (list it in the agent's http allow_hosts to reach it)")
	})

	t.Run("allowed_explicitly", func(t *testing.T) {
		t.Parallel()
		out, err := callHTTP(t, HTTPRequest(loopback), map[string]any{"method": "POST", "url": srv.URL + "/echo", "body": "hello", "headers": map[string]string{"X-Token": "t1"}})
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(out, "HTTP 200 OK\n"), out)
		require.Contains(t, out, "\nX-Seen: t1\n")
		require.True(t, strings.HasSuffix(out, "\n\nPOST hello"), out)
	})

	t.Run("allowed_by_range", func(t *testing.T) {
		t.Parallel()
		out, err := callHTTP(t, HTTPRequest(HTTPPolicy{AllowHosts: []string{"127.0.0.0/8"}}), map[string]any{"url": srv.URL + "/echo"})
		require.NoError(t, err)
		require.Contains(t, out, "GET ")
	})

	t.Run("host_not_in_the_list", func(t *testing.T) {
		t.Parallel()
		_, err := callHTTP(t, HTTPRequest(HTTPPolicy{AllowHosts: []string{"api.example.com", "*.example.org"}}), map[string]any{"url": srv.URL + "/echo"})
		require.ErrorContains(t, err, "127.0.0.1 is not in this agent's http allow_hosts (api.example.com, *.example.org)")
	})

	t.Run("redirect_checked", func(t *testing.T) {
		t.Parallel()
		_, err := callHTTP(t, HTTPRequest(loopback), map[string]any{"url": srv.URL + "/redirect-out"})
		require.ErrorContains(t, err, "localhost is not in this agent's http allow_hosts (127.0.0.1)")
	})

	t.Run("wildcard_is_not_explicit_for_private_addresses", func(t *testing.T) {
		t.Parallel()
		p := HTTPPolicy{AllowHosts: []string{"*.localhost"}}
		ok, explicit := p.hostAllowed("app.localhost")
		require.True(t, ok)
		require.False(t, explicit)
	})

	t.Run("size_capped", func(t *testing.T) {
		t.Parallel()
		out, err := callHTTP(t, HTTPRequest(HTTPPolicy{AllowHosts: []string{"127.0.0.1"}, MaxBytes: 1000}), map[string]any{"url": srv.URL + "/big"})
		require.NoError(t, err)
		require.True(t, strings.HasSuffix(out, "\n\n"+strings.Repeat("a", 1000)+"\n[body truncated at 1000 bytes]"), out[len(out)-60:])
	})

	t.Run("time_limited", func(t *testing.T) {
		t.Parallel()
		_, err := callHTTP(t, HTTPRequest(HTTPPolicy{AllowHosts: []string{"127.0.0.1"}, Timeout: 300 * time.Millisecond}), map[string]any{"url": srv.URL + "/hang"})
		require.ErrorContains(t, err, "timed out after 300ms")
	})

	t.Run("not_http", func(t *testing.T) {
		t.Parallel()
		_, err := callHTTP(t, HTTPRequest(loopback), map[string]any{"url": "file:///etc/passwd"})
		require.ErrorContains(t, err, `"file:///etc/passwd" is not an http or https URL`)
		_, err = callHTTP(t, HTTPRequest(loopback), map[string]any{"url": "/relative"})
		require.ErrorContains(t, err, "is not an absolute http(s) URL")
		_, err = callHTTP(t, HTTPRequest(loopback), map[string]any{"url": srv.URL, "method": "TRACE"})
		require.ErrorContains(t, err, "Invalid arguments for tool 'http_request'")
	})
}

func TestReadPage(t *testing.T) {
	t.Parallel()
	srv := webServer(t)
	tool := ReadPage(HTTPPolicy{AllowHosts: []string{"127.0.0.1"}})

	out, err := callHTTP(t, tool, map[string]any{"url": srv.URL + "/page"})
	require.NoError(t, err)
	require.Equal(t, "Release notes\nVersion 2\nFaster runs and fewer surprises.\nOne\nTwo", out)

	out, err = callHTTP(t, tool, map[string]any{"url": srv.URL + "/echo"})
	require.NoError(t, err)
	require.Equal(t, "GET", out)

	_, err = callHTTP(t, tool, map[string]any{"url": srv.URL + "/json"})
	require.ErrorContains(t, err, "is application/json, not a page: use http_request for other content")
	_, err = callHTTP(t, tool, map[string]any{"url": srv.URL + "/missing"})
	require.ErrorContains(t, err, "answered HTTP 404 Not Found")
	_, err = callHTTP(t, ReadPage(HTTPPolicy{}), map[string]any{"url": srv.URL + "/page"})
	require.ErrorIs(t, err, ErrHostNotAllowed)
}

// The model sees the refusal as an error result and the run goes on.
func TestHTTPRequestInARun(t *testing.T) {
	t.Parallel()
	srv := webServer(t)
	model := scripted.New([]scripted.Step{
		scripted.CallTool(HTTPRequestName, map[string]string{"url": srv.URL + "/echo"}, "h1"),
		scripted.Text("Could not reach it."),
	})
	a := &loop.Agent{Name: "a", Provider: model, Tools: []*loop.Tool{HTTPRequest(HTTPPolicy{})}}
	res, err := loop.NewRunner(loop.RunnerConfig{}).Run(context.Background(), a, []loop.Entry{loop.UserText("fetch")})
	require.NoError(t, err)
	require.Equal(t, "Could not reach it.", res.Output)
	r := res.Entries[2]
	require.Equal(t, loop.KindToolResult, r.Kind)
	require.True(t, r.IsError)
	require.Contains(t, r.Output, "a private or local address")
}

func TestHTTPPolicyValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, HTTPPolicy{AllowHosts: []string{"api.example.com", "*.example.org", "127.0.0.1", "::1", "10.0.0.0/8"}}.Validate())
	for _, bad := range []string{"https://x.com", "x.com:443", "a*.x.com", "", "10.0.0.0/99"} {
		require.Error(t, HTTPPolicy{AllowHosts: []string{bad}}.Validate(), bad)
	}
}
