// Package otlptest is an in-process OTLP trace receiver for tests: a real
// HTTP server decoding OTLP/HTTP protobuf (POST /v1/traces) and a real
// gRPC server of the OTLP TraceService, both keeping the spans they
// receive, so a test can point a process's OTEL_EXPORTER_OTLP_ENDPOINT at
// it and assert the spans, their traces and their parents.
package otlptest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one received span.
type Span struct {
	Name     string
	TraceID  string // hex
	SpanID   string // hex
	ParentID string // hex; "" for a root span
	Kind     string // SPAN_KIND_SERVER, …
	// Service is the resource's service.name; Resource holds every
	// resource attribute.
	Service  string
	Resource map[string]string
	Attrs    map[string]string
	Error    bool // status code Error
	Start    time.Time
	End      time.Time
}

func (s Span) String() string {
	return fmt.Sprintf("%s[%s %s<-%s %v]", s.Name, s.Service, short(s.SpanID), short(s.ParentID), s.Attrs)
}

func short(id string) string {
	if len(id) > 6 {
		return id[:6]
	}
	return id
}

// Receiver keeps the spans sent to it. Its methods are safe for
// concurrent use.
type Receiver struct {
	// URL is the OTLP/HTTP base URL (OTEL_EXPORTER_OTLP_ENDPOINT):
	// http://127.0.0.1:<port>.
	URL string
	// GRPCAddr is the OTLP/gRPC endpoint, 127.0.0.1:<port> (use it with
	// OTEL_EXPORTER_OTLP_INSECURE=true).
	GRPCAddr string

	mu       sync.Mutex
	spans    []Span
	requests int
}

// Start serves both receivers until the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(r.serveHTTP), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	r.URL = "http://" + ln.Addr().String()
	gln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, grpcService{r: r})
	go func() { _ = gs.Serve(gln) }()
	r.GRPCAddr = gln.Addr().String()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		gs.Stop()
	})
	return r
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "only POST /v1/traces", http.StatusNotFound)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "want application/x-protobuf, got "+ct, http.StatusUnsupportedMediaType)
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.add(&msg)
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = io.Copy(w, bytes.NewReader(out))
}

type grpcService struct {
	coltracepb.UnimplementedTraceServiceServer
	r *Receiver
}

func (g grpcService) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	g.r.add(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (r *Receiver) add(req *coltracepb.ExportTraceServiceRequest) {
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				got = append(got, Span{
					Name: s.GetName(), TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentID: hex.EncodeToString(s.GetParentSpanId()), Kind: s.GetKind().String(),
					Service: res["service.name"], Resource: res, Attrs: attrs(s.GetAttributes()),
					Error: s.GetStatus().GetCode() == 2,
					Start: time.Unix(0, int64(s.GetStartTimeUnixNano())), End: time.Unix(0, int64(s.GetEndTimeUnixNano())),
				})
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.requests++
	r.mu.Unlock()
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = fmt.Sprint(x.IntValue)
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = fmt.Sprint(x.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			m[kv.GetKey()] = fmt.Sprint(x.DoubleValue)
		default:
			m[kv.GetKey()] = v.String()
		}
	}
	return m
}

// Spans returns the spans received so far, in arrival order.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Requests counts the export requests received.
func (r *Receiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// Find returns the received spans match accepts.
func (r *Receiver) Find(match func(Span) bool) []Span {
	var out []Span
	for _, s := range r.Spans() {
		if match(s) {
			out = append(out, s)
		}
	}
	return out
}

// WaitFor waits (polling, up to timeout) until the received spans include
// one that match accepts, and returns it; it fails the test naming what,
// and the spans received, if none arrives.
func (r *Receiver) WaitFor(t testing.TB, what string, timeout time.Duration, match func(Span) bool) Span {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if got := r.Find(match); len(got) > 0 {
			return got[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("otlptest: no span %s within %s; received:\n%s", what, timeout, Dump(r.Spans()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Dump formats spans one a line, sorted by trace and start, for failure
// messages.
func Dump(spans []Span) string {
	s := append([]Span(nil), spans...)
	sort.Slice(s, func(i, j int) bool {
		if s[i].TraceID != s[j].TraceID {
			return s[i].TraceID < s[j].TraceID
		}
		return s[i].Start.Before(s[j].Start)
	})
	var b strings.Builder
	for _, x := range s {
		fmt.Fprintf(&b, "  trace %s  %s\n", short(x.TraceID), x)
	}
	return b.String()
}
