package console

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
)

//go:embed assets
var assets embed.FS

// AssetsPrefix is the path under which [Handler] serves the page's
// scripts and styles; the page itself is "/".
const AssetsPrefix = "/console/"

// Serves reports whether r is a request for the console — a GET or HEAD of
// "/" or of a path under [AssetsPrefix] — which a server hands to
// [Handler], without asking for a token.
func Serves(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		(r.URL.Path == "/" || strings.HasPrefix(r.URL.Path, AssetsPrefix))
}

// contentSecurityPolicy allows the bundle's own scripts and styles only,
// and API calls to this origin or (when the console is pointed at another
// gateway) any http(s) origin.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self' http: https:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// asset is one embedded file, with its validator.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

// Assets returns the bundle as a file system: index.html, console.css and
// the JavaScript modules under js/.
func Assets() fs.FS {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic("console: " + err.Error()) // "assets" is a valid path
	}
	return sub
}

// handler serves the embedded bundle.
type handler struct {
	files map[string]asset // by URL path: "/" and "/console/…"
}

// Handler returns the handler of the console: "/" is the page,
// "/console/<file>" its assets; any other path is 404. Replies carry an
// ETag (browsers revalidate, so an upgraded binary's console shows at once)
// and a Content-Security-Policy that lets only the bundle's own scripts
// run. It is safe for concurrent use.
func Handler() http.Handler {
	h := &handler{files: map[string]asset{}}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		ct := mime.TypeByExtension(path.Ext(p))
		if ct == "" {
			ct = "application/octet-stream"
		}
		a := asset{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		rel := strings.TrimPrefix(p, "assets/")
		if rel == "index.html" {
			h.files["/"] = a
		}
		h.files[AssetsPrefix+rel] = a
		return nil
	})
	if err != nil {
		// The bundle is compiled in: a read error is a build mistake.
		panic("console: reading the embedded assets: " + err.Error())
	}
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "the console is read with GET", http.StatusMethodNotAllowed)
		return
	}
	a, ok := h.files[r.URL.Path]
	if !ok {
		http.Error(w, "no console file "+r.URL.Path+": open / for the console", http.StatusNotFound)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", a.contentType)
	hd.Set("Cache-Control", "no-cache")
	hd.Set("ETag", a.etag)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	if match := r.Header.Get("If-None-Match"); match != "" && strings.Contains(match, a.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hd.Set("Content-Length", strconv.Itoa(len(a.body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(a.body)
}
