package catalog

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

func TestHTTPSection(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "pong") }))
	t.Cleanup(srv.Close)
	agent := func(extra string) string {
		return "agents:\n  - name: a\n    model: scripted\n    script: [{text: hi}]\n    tools: [http_request, read_page]\n" + extra
	}
	get := func(t *testing.T, c *Catalog) (string, error) {
		t.Helper()
		a, _ := c.Get("a")
		v, err := a.Tools[0].Func(context.Background(), &loop.RunContext{}, []byte(`{"url":"`+srv.URL+`"}`))
		if err != nil {
			return "", err
		}
		return a.Tools[0].Render(v)
	}

	t.Run("allow_list_reaches_loopback", func(t *testing.T) {
		t.Parallel()
		c, err := Parse([]byte(agent("    http: {allow_hosts: [127.0.0.1], timeout: 5s}\n")), Options{})
		require.NoError(t, err)
		out, err := get(t, c)
		require.NoError(t, err)
		require.Contains(t, out, "HTTP 200 OK")
		var names []string
		for _, s := range c.ToolSchemas("a") {
			names = append(names, s.Name)
		}
		require.Equal(t, []string{"http_request", "read_page"}, names)
	})

	t.Run("private_denied_by_default", func(t *testing.T) {
		t.Parallel()
		c, err := Parse([]byte(agent("")), Options{})
		require.NoError(t, err)
		_, err = get(t, c)
		require.ErrorContains(t, err, "a private or local address")
	})

	for _, tc := range []struct{ name, extra, want string }{
		{"unknown_key", "    http: {allow: [x]}\n", `unknown key "allow" in the http section (known: allow_hosts, allow_private, max_bytes, timeout)`},
		{"bad_entry", "    http: {allow_hosts: [\"https://x.com\"]}\n", `http: allow_hosts entry "https://x.com"`},
		{"negative", "    http: {max_bytes: -1}\n", "http.max_bytes -1 is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(agent(tc.extra)), Options{})
			require.ErrorContains(t, err, tc.want)
		})
	}
	t.Run("settings_without_the_tools", func(t *testing.T) {
		t.Parallel()
		_, err := Parse([]byte("agents:\n  - name: a\n    model: scripted\n    script: [{text: hi}]\n    http: {allow_hosts: [x.com]}\n"), Options{})
		require.ErrorContains(t, err, "the agent's tools name neither")
	})
}
