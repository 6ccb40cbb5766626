package otlp_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/lovia-fleet/lovia/internal/otlptest"
	"github.com/lovia-fleet/lovia/pkg/telemetry/otlp"
)

// env is a Getenv over a map.
func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

// clearOTEL unsets every variable these tests set, so the process
// environment of the test binary does not leak in (the exporters read it).
func clearOTEL(t *testing.T) {
	for _, k := range []string{
		"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_INSECURE",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_SDK_DISABLED",
	} {
		t.Setenv(k, "")
	}
}

// TestOffWithoutConfig: with no OTEL configuration (or one that turns
// tracing off), the provider is OpenTelemetry's noop one, spans record
// nothing and nothing reaches a collector, even one listening where an
// endpoint variable would point.
func TestOffWithoutConfig(t *testing.T) {
	rec := otlptest.Start(t)
	for name, vars := range map[string]map[string]string{
		"nothing set":               {},
		"only a service name":       {"OTEL_SERVICE_NAME": "x", "OTEL_RESOURCE_ATTRIBUTES": "a=b"},
		"exporter none":             {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": rec.URL},
		"sdk disabled":              {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": rec.URL},
		"sdk disabled, exporter on": {"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := otlp.New(context.Background(), otlp.Config{Getenv: env(vars)})
			require.NoError(t, err)
			require.False(t, p.Enabled())
			require.Equal(t, "off", p.String())
			require.IsType(t, noop.TracerProvider{}, p.TracerProvider())
			_, span := p.TracerProvider().Tracer("t").Start(context.Background(), "s")
			require.False(t, span.IsRecording(), "a span of the noop provider records nothing")
			require.False(t, span.SpanContext().IsValid(), "and has no trace id to propagate")
			span.End()
			require.NoError(t, p.Shutdown(context.Background()))
		})
	}
	require.Zero(t, rec.Requests(), "nothing was exported")
}

// TestExportsOverHTTP: an OTLP endpoint turns tracing on; the spans reach
// the collector over OTLP/HTTP protobuf (the default protocol) by
// Shutdown at the latest, with the service name given and the resource
// attributes of OTEL_RESOURCE_ATTRIBUTES.
func TestExportsOverHTTP(t *testing.T) {
	clearOTEL(t)
	rec := otlptest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rec.URL)
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test,service.instance.id=w1")
	p, err := otlp.New(context.Background(), otlp.Config{ServiceName: "lovia-test", ServiceVersion: "v1.2.3"})
	require.NoError(t, err)
	require.True(t, p.Enabled())
	require.Equal(t, "otlp http/protobuf to "+rec.URL+"/v1/traces", p.String())
	ctx, parent := p.TracerProvider().Tracer("t").Start(context.Background(), "parent")
	_, child := p.TracerProvider().Tracer("t").Start(ctx, "child")
	child.End()
	parent.End()
	require.NoError(t, p.Shutdown(context.Background()), "shutdown flushes")

	spans := rec.Spans()
	require.Len(t, spans, 2, otlptest.Dump(spans))
	byName := map[string]otlptest.Span{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	require.Equal(t, byName["parent"].SpanID, byName["child"].ParentID)
	require.Equal(t, byName["parent"].TraceID, byName["child"].TraceID)
	res := byName["parent"].Resource
	require.Equal(t, "lovia-test", res["service.name"])
	require.Equal(t, "v1.2.3", res["service.version"])
	require.Equal(t, "test", res["deployment.environment"])
	require.Equal(t, "w1", res["service.instance.id"])
}

// TestServiceNameFromEnv: OTEL_SERVICE_NAME wins over the process's name.
func TestServiceNameFromEnv(t *testing.T) {
	clearOTEL(t)
	rec := otlptest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", rec.URL+"/v1/traces")
	t.Setenv("OTEL_SERVICE_NAME", "billing-workers")
	p, err := otlp.New(context.Background(), otlp.Config{ServiceName: "lovia-worker"})
	require.NoError(t, err)
	_, s := p.TracerProvider().Tracer("t").Start(context.Background(), "s")
	s.End()
	require.NoError(t, p.Shutdown(context.Background()))
	require.Len(t, rec.Spans(), 1)
	require.Equal(t, "billing-workers", rec.Spans()[0].Service)
}

// TestExportsOverGRPC: OTEL_EXPORTER_OTLP_PROTOCOL=grpc exports to an
// OTLP gRPC TraceService.
func TestExportsOverGRPC(t *testing.T) {
	clearOTEL(t)
	rec := otlptest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+rec.GRPCAddr)
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
	p, err := otlp.New(context.Background(), otlp.Config{ServiceName: "lovia-grpc"})
	require.NoError(t, err)
	require.Contains(t, p.String(), "otlp grpc")
	_, s := p.TracerProvider().Tracer("t").Start(context.Background(), "over-grpc")
	s.End()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, p.Shutdown(ctx))
	spans := rec.Spans()
	require.Len(t, spans, 1, otlptest.Dump(spans))
	require.Equal(t, "over-grpc", spans[0].Name)
	require.Equal(t, "lovia-grpc", spans[0].Service)
}

// TestSamplerFromEnv: OTEL_TRACES_SAMPLER=always_off records nothing.
func TestSamplerFromEnv(t *testing.T) {
	clearOTEL(t)
	rec := otlptest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rec.URL)
	t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	p, err := otlp.New(context.Background(), otlp.Config{})
	require.NoError(t, err)
	require.True(t, p.Enabled())
	_, s := p.TracerProvider().Tracer("t").Start(context.Background(), "s")
	require.False(t, s.IsRecording())
	s.End()
	require.NoError(t, p.Shutdown(context.Background()))
	require.Empty(t, rec.Spans())
}

// TestBadConfig: a value New cannot use is an error naming the variable
// and the values it takes; no provider is built.
func TestBadConfig(t *testing.T) {
	for _, c := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER=zipkin is not supported: set otlp"},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "OTEL_EXPORTER_OTLP_PROTOCOL=http/json is not supported: set http/protobuf or grpc"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "udp"}, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=udp"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_SAMPLER": "sometimes"}, "OTEL_TRACES_SAMPLER=sometimes is not supported"},
		// Values the SDK would log and ignore, and go on without.
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "not-a-url"}, "OTEL_EXPORTER_OTLP_ENDPOINT=not-a-url is not a URL the exporter can use: write http://host:port"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=collector:4317 is not a URL"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_HEADERS": "authorization"}, "OTEL_EXPORTER_OTLP_HEADERS holds an entry that is not key=value"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_TIMEOUT": "10s"}, "OTEL_EXPORTER_OTLP_TIMEOUT=10s is not a timeout: give whole milliseconds"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, "OTEL_EXPORTER_OTLP_COMPRESSION=zstd is not supported: set gzip or none"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, "OTEL_TRACES_SAMPLER_ARG=2 is not a ratio"},
	} {
		t.Run(c.want, func(t *testing.T) {
			p, err := otlp.New(context.Background(), otlp.Config{Getenv: env(c.vars)})
			require.Nil(t, p)
			require.True(t, errors.Is(err, otlp.ErrConfig), "%v", err)
			require.ErrorContains(t, err, c.want)
		})
	}
}
