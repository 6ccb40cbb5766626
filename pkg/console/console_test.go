package console_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/console"
)

func get(t *testing.T, h http.Handler, method, path string, header ...string) *http.Response {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return string(b)
}

func TestHandler(t *testing.T) {
	t.Parallel()
	h := console.Handler()

	t.Run("the page at / with a strict content security policy", func(t *testing.T) {
		res := get(t, h, http.MethodGet, "/")
		require.Equal(t, http.StatusOK, res.StatusCode)
		require.Equal(t, "text/html; charset=utf-8", res.Header.Get("Content-Type"))
		require.Contains(t, res.Header.Get("Content-Security-Policy"), "script-src 'self'")
		require.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"))
		require.Contains(t, body(t, res), `<script type="module" src="/console/js/app.js">`)
	})

	t.Run("scripts as JavaScript, styles as CSS", func(t *testing.T) {
		for path, ct := range map[string]string{"/console/js/app.js": "text/javascript", "/console/console.css": "text/css"} {
			res := get(t, h, http.MethodGet, path)
			require.Equal(t, http.StatusOK, res.StatusCode, path)
			require.True(t, strings.HasPrefix(res.Header.Get("Content-Type"), ct), "%s: %s", path, res.Header.Get("Content-Type"))
		}
	})

	t.Run("revalidation with the ETag", func(t *testing.T) {
		etag := get(t, h, http.MethodGet, "/console/js/app.js").Header.Get("ETag")
		require.NotEmpty(t, etag)
		res := get(t, h, http.MethodGet, "/console/js/app.js", "If-None-Match", etag)
		require.Equal(t, http.StatusNotModified, res.StatusCode)
		require.Empty(t, body(t, res))
	})

	t.Run("HEAD has the headers and no body", func(t *testing.T) {
		res := get(t, h, http.MethodHead, "/")
		require.Equal(t, http.StatusOK, res.StatusCode)
		require.NotEmpty(t, res.Header.Get("Content-Length"))
		require.Empty(t, body(t, res))
	})

	t.Run("an unknown file is 404 and says where the console is", func(t *testing.T) {
		res := get(t, h, http.MethodGet, "/console/nope.js")
		require.Equal(t, http.StatusNotFound, res.StatusCode)
		require.Contains(t, body(t, res), "open / for the console")
		require.Equal(t, http.StatusNotFound, get(t, h, http.MethodGet, "/console/").StatusCode, "no directory listing")
	})

	t.Run("other methods are 405 with Allow", func(t *testing.T) {
		res := get(t, h, http.MethodPost, "/")
		require.Equal(t, http.StatusMethodNotAllowed, res.StatusCode)
		require.Equal(t, "GET, HEAD", res.Header.Get("Allow"))
	})
}

func TestServes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		method, path string
		want         bool
	}{
		{"GET", "/", true},
		{"HEAD", "/", true},
		{"GET", "/console/js/app.js", true},
		{"POST", "/", false},
		{"GET", "/v1/runs", false},
		{"GET", "/healthz", false},
		{"GET", "/consoles", false},
	} {
		require.Equal(t, c.want, console.Serves(httptest.NewRequest(c.method, c.path, nil)), "%s %s", c.method, c.path)
	}
}

// TestBundleIsSelfContained: every module a script imports is in the
// bundle, and nothing is fetched from another host (no CDN).
func TestBundleIsSelfContained(t *testing.T) {
	t.Parallel()
	h := console.Handler()
	imports := regexp.MustCompile(`(?m)^\s*(?:import|export)\b[^'"]*\bfrom\s+'([^']+)'`)
	external := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|@import|\burl\(\s*['"]?https?:|from\s+'https?:`)
	files := []string{"/", "/console/console.css"}
	for _, js := range jsFiles(t) {
		files = append(files, "/console/js/"+js)
	}
	for _, path := range files {
		res := get(t, h, http.MethodGet, path)
		require.Equal(t, http.StatusOK, res.StatusCode, path)
		text := body(t, res)
		require.False(t, external.MatchString(text), "%s loads something from another host: %q", path, external.FindString(text))
		for _, m := range imports.FindAllStringSubmatch(text, -1) {
			require.True(t, strings.HasPrefix(m[1], "./"), "%s imports %s: only the bundle's own modules", path, m[1])
			dep := "/console/js/" + strings.TrimPrefix(m[1], "./")
			require.Equal(t, http.StatusOK, get(t, h, http.MethodGet, dep).StatusCode, "%s imports %s, which is missing", path, dep)
		}
	}
}

// jsFiles lists the bundle's scripts through the handler's own listing of
// the page's entry point and the modules it reaches.
func jsFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	require.NoError(t, fs.WalkDir(console.Assets(), "js", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, strings.TrimPrefix(p, "js/"))
		}
		return err
	}))
	require.NotEmpty(t, out)
	return out
}
