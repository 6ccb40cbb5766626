package providertest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Response is one scripted answer of a [Server].
type Response struct {
	// Status is the HTTP status (default 200).
	Status int
	// Header is set on the response. A Body that starts with "data:" or
	// "event:" defaults Content-Type to text/event-stream, else to
	// application/json.
	Header map[string]string
	// Body is written verbatim and flushed.
	Body string
	// Cut aborts the connection after Body, without ending the chunked
	// encoding: the client sees a stream cut mid-way.
	Cut bool
}

// Request is one request the server received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// JSON decodes the request body into a generic value.
func (r Request) JSON(t testing.TB) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("request body is not a JSON object: %v\n%s", err, r.Body)
	}
	return v
}

// Server replays scripted responses in order, one per request, whatever
// the path; a request beyond the script gets a 599 that names it.
type Server struct {
	*httptest.Server
	mu        sync.Mutex
	responses []Response
	requests  []Request
}

// NewServer starts a server that answers with responses in order. It is
// closed when the test ends.
func NewServer(t testing.TB, responses ...Response) *Server {
	t.Helper()
	s := &Server{responses: responses}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// Push appends responses to the script.
func (s *Server) Push(responses ...Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.responses = append(s.responses, responses...)
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	var (
		resp Response
		ok   bool
	)
	if len(s.responses) > 0 {
		resp, s.responses, ok = s.responses[0], s.responses[1:], true
	}
	s.mu.Unlock()
	if !ok {
		http.Error(w, "providertest: unexpected request "+r.Method+" "+r.URL.Path, 599)
		return
	}
	ct := "application/json"
	if b := strings.TrimSpace(resp.Body); strings.HasPrefix(b, "data:") || strings.HasPrefix(b, "event:") {
		ct = "text/event-stream"
	}
	w.Header().Set("Content-Type", ct)
	for k, v := range resp.Header {
		w.Header().Set(k, v)
	}
	status := resp.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = io.Copy(w, strings.NewReader(resp.Body))
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	if resp.Cut {
		panic(http.ErrAbortHandler)
	}
}

// SSE is a 200 event-stream response with body.
func SSE(body string) Response {
	return Response{Body: body, Header: map[string]string{"Content-Type": "text/event-stream"}}
}

// JSONError is an error response with a JSON body and extra headers given
// as name, value pairs.
func JSONError(status int, body string, header ...string) Response {
	h := map[string]string{"Content-Type": "application/json"}
	for i := 0; i+1 < len(header); i += 2 {
		h[header[i]] = header[i+1]
	}
	return Response{Status: status, Body: body, Header: h}
}

// Fixture reads testdata/<name> of the calling package.
func Fixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
	return string(b)
}

// Cut returns the part of an SSE fixture before the first occurrence of
// marker: a stream that breaks mid-way.
func Cut(t testing.TB, sse, marker string) Response {
	t.Helper()
	i := strings.Index(sse, marker)
	if i < 0 {
		t.Fatalf("marker %q not in fixture", marker)
	}
	r := SSE(sse[:i])
	r.Cut = true
	return r
}

// Compact re-encodes JSON without insignificant spaces, for comparisons.
func Compact(t testing.TB, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatalf("compact %q: %v", s, err)
	}
	return b.String()
}
