package otlp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Protocols of OTEL_EXPORTER_OTLP_PROTOCOL that New exports with.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Config configures New. The zero value is usable.
type Config struct {
	// ServiceName is service.name when OTEL_SERVICE_NAME (or service.name
	// in OTEL_RESOURCE_ATTRIBUTES) does not set it. Default "lovia".
	ServiceName string
	// ServiceVersion is service.version. Default: none.
	ServiceVersion string
	// Getenv reads the variables that decide whether and how to export
	// (exporter, protocol, endpoints, sampler, OTEL_SDK_DISABLED).
	// Default os.Getenv. The exporters and the resource read the rest of
	// their variables from the process environment.
	Getenv func(string) string
	// Logger receives what New decided (one line). Default: discards.
	Logger *slog.Logger
}

// Provider is a process's tracer provider: OpenTelemetry's SDK exporting
// over OTLP, or the noop provider when tracing is off.
type Provider struct {
	tp       trace.TracerProvider
	sdk      *sdktrace.TracerProvider // nil when off
	protocol string
	endpoint string
}

// New builds the provider the OTEL_* environment asks for (see the
// package doc). Tracing is off — a noop provider, no goroutine, no
// connection — unless OTEL_TRACES_EXPORTER=otlp or an OTLP endpoint
// variable is set. A value New cannot use is an error matching ErrConfig
// that names the variable. The exporter connects lazily: an unreachable
// collector costs dropped spans, never a failed start.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.ServiceName == "" {
		cfg.ServiceName = "lovia"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	off := &Provider{tp: noop.NewTracerProvider()}
	on, err := enabled(cfg.Getenv)
	if err != nil {
		return nil, err
	}
	if !on {
		return off, nil
	}
	protocol, err := tracesProtocol(cfg.Getenv)
	if err != nil {
		return nil, err
	}
	if err := checkSampler(cfg.Getenv("OTEL_TRACES_SAMPLER")); err != nil {
		return nil, err
	}
	if err := checkExporterEnv(cfg.Getenv); err != nil {
		// The exporter would log the value it cannot use and go on
		// without it (no auth header, no endpoint): refuse it instead.
		return nil, err
	}
	var exp sdktrace.SpanExporter
	switch protocol {
	case ProtocolGRPC:
		exp, err = otlptracegrpc.New(ctx)
	default:
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: the OTLP %s trace exporter: %w (check OTEL_EXPORTER_OTLP_* variables)", ErrConfig, protocol, err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", cfg.ServiceName)}
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", cfg.ServiceVersion))
	}
	// Later detectors win: the environment overrides the defaults.
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("%w: OTEL_RESOURCE_ATTRIBUTES: %w (write key=value pairs separated by commas)", ErrConfig, err)
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	p := &Provider{tp: sdk, sdk: sdk, protocol: protocol, endpoint: endpoint(cfg.Getenv, protocol)}
	cfg.Logger.Info("tracing: exporting spans over OTLP", "protocol", protocol, "endpoint", p.endpoint)
	return p, nil
}

// TracerProvider returns the provider to pass to the fleet's components.
func (p *Provider) TracerProvider() trace.TracerProvider { return p.tp }

// Enabled reports whether spans are exported.
func (p *Provider) Enabled() bool { return p.sdk != nil }

// String says where spans go, for logs and start-up lines.
func (p *Provider) String() string {
	if p.sdk == nil {
		return "off"
	}
	return "otlp " + p.protocol + " to " + p.endpoint
}

// DefaultShutdownTimeout bounds Shutdown when ctx has no deadline.
const DefaultShutdownTimeout = 5 * time.Second

// Shutdown exports the spans not exported yet and stops the exporter. Call
// it once, when the process stops; spans ended after it are dropped. It
// waits at most until ctx ends (DefaultShutdownTimeout without a
// deadline). With tracing off it does nothing.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p.sdk == nil {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultShutdownTimeout)
		defer cancel()
	}
	if err := p.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("otlp: flushing spans at shutdown: %w", err)
	}
	return nil
}

// enabled decides whether to export: OTEL_SDK_DISABLED=true and
// OTEL_TRACES_EXPORTER=none turn it off; otlp turns it on; unset, an
// endpoint variable turns it on.
func enabled(getenv func(string) string) (bool, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false, nil
	}
	switch v := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))); v {
	case "none":
		return false, nil
	case "otlp":
		return true, nil
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "", nil
	default:
		return false, fmt.Errorf("%w: OTEL_TRACES_EXPORTER=%s is not supported: set otlp (with OTEL_EXPORTER_OTLP_ENDPOINT) or none", ErrConfig, v)
	}
}

func tracesProtocol(getenv func(string) string) (string, error) {
	name, v := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if v == "" {
		name, v = "OTEL_EXPORTER_OTLP_PROTOCOL", getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch v = strings.ToLower(strings.TrimSpace(v)); v {
	case "", ProtocolHTTP:
		return ProtocolHTTP, nil
	case ProtocolGRPC:
		return ProtocolGRPC, nil
	}
	return "", fmt.Errorf("%w: %s=%s is not supported: set http/protobuf or grpc", ErrConfig, name, v)
}

func checkSampler(v string) error {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio":
		return nil
	}
	return fmt.Errorf("%w: OTEL_TRACES_SAMPLER=%s is not supported: set always_on, always_off, traceidratio or parentbased_always_on, parentbased_always_off, parentbased_traceidratio", ErrConfig, v)
}

// checkExporterEnv checks the OTEL_* values the SDK would otherwise log
// and ignore: the endpoints, headers, timeouts, compression and the
// sampler's ratio.
func checkExporterEnv(getenv func(string) string) error {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		v := getenv(name)
		if v == "" {
			continue
		}
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%w: %s=%s is not a URL the exporter can use: write http://host:port or https://host:port (the collector's OTLP port: 4318 for http/protobuf, 4317 for grpc)", ErrConfig, name, v)
		}
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		v := getenv(name)
		if strings.TrimSpace(v) == "" {
			continue
		}
		for _, kv := range strings.Split(v, ",") {
			if k, _, ok := strings.Cut(kv, "="); !ok || strings.TrimSpace(k) == "" {
				// Headers carry secrets (an API key): name the variable, not its value.
				return fmt.Errorf("%w: %s holds an entry that is not key=value: write key=value pairs separated by commas (values URL-encoded), e.g. authorization=Bearer%%20<token>", ErrConfig, name)
			}
		}
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"} {
		v := getenv(name)
		if v == "" {
			continue
		}
		if ms, err := strconv.Atoi(strings.TrimSpace(v)); err != nil || ms < 0 {
			return fmt.Errorf("%w: %s=%s is not a timeout: give whole milliseconds, e.g. 10000", ErrConfig, name, v)
		}
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"} {
		switch v := getenv(name); strings.ToLower(strings.TrimSpace(v)) {
		case "", "gzip", "none":
		default:
			return fmt.Errorf("%w: %s=%s is not supported: set gzip or none", ErrConfig, name, v)
		}
	}
	switch strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER"))) {
	case "traceidratio", "parentbased_traceidratio":
		v := getenv("OTEL_TRACES_SAMPLER_ARG")
		if v == "" {
			break
		}
		if r, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil || r < 0 || r > 1 {
			return fmt.Errorf("%w: OTEL_TRACES_SAMPLER_ARG=%s is not a ratio: give the share of traces to keep, from 0 to 1 (e.g. 0.1)", ErrConfig, v)
		}
	}
	return nil
}

// endpoint is where spans go, as the exporter resolves it, for the log.
func endpoint(getenv func(string) string, protocol string) string {
	if v := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); v != "" {
		return v
	}
	if v := getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); v != "" {
		if protocol == ProtocolHTTP {
			return strings.TrimSuffix(v, "/") + "/v1/traces"
		}
		return v
	}
	if protocol == ProtocolGRPC {
		return "localhost:4317"
	}
	return "http://localhost:4318/v1/traces"
}
