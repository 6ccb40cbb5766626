package gateway

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/lovia-fleet/lovia/pkg/telemetry"
)

// traced wraps h in an HTTP server span per request, named by its route
// ("POST /v1/runs"), the child of the traceparent the request carries (a
// caller's trace), with the API's tracer provider (service.Config.Tracing).
// The API's submit span, and so the whole run, are its children. With a
// noop provider it returns h.
func (g *Gateway) traced(h http.Handler) http.Handler {
	var tp trace.TracerProvider
	if g.cfg.API != nil {
		tp = g.cfg.API.TracerProvider()
	}
	if telemetry.IsNoop(tp) {
		return h
	}
	tracer := telemetry.Tracer(tp)
	var w3c propagation.TraceContext
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := w3c.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, "HTTP "+r.Method, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path),
		))
		defer span.End()
		r = r.WithContext(ctx)
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		// The mux set the route it matched on r.
		if r.Pattern != "" {
			span.SetName(r.Pattern)
			span.SetAttributes(attribute.String("http.route", r.Pattern))
		}
		span.SetAttributes(attribute.Int("http.response.status_code", sw.code()))
		if sw.code() >= 500 {
			span.SetStatus(codes.Error, http.StatusText(sw.code()))
		}
	})
}

// statusWriter records the status code of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusWriter) code() int {
	if s.status == 0 {
		return http.StatusOK
	}
	return s.status
}
