package cli

import (
	"context"
	"log/slog"
	"runtime/debug"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/lovia-fleet/lovia/pkg/telemetry/otlp"
)

// startTracing builds the process's tracer provider from the OTEL_*
// environment (off unless an OTLP endpoint or OTEL_TRACES_EXPORTER=otlp is
// set; see the README's Traces section). stop flushes the spans not yet
// exported: call it last, once the components that open spans stopped.
func startTracing(ctx context.Context, env *Env, service string, log *slog.Logger) (p *otlp.Provider, stop func(), err error) {
	version := ""
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "(devel)" {
		version = bi.Main.Version
	}
	p, err = otlp.New(ctx, otlp.Config{ServiceName: service, ServiceVersion: version, Getenv: env.Getenv, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	if !p.Enabled() {
		return p, func() {}, nil
	}
	// A process may set the globals: libraries that read them (none of
	// the fleet's) then propagate W3C trace context, and the SDK's export
	// errors go to the process log.
	otel.SetTextMapPropagator(propagation.TraceContext{})
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: exporting spans failed; check OTEL_EXPORTER_OTLP_ENDPOINT and the collector", "error", err)
	}))
	return p, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), otlp.DefaultShutdownTimeout)
		defer cancel()
		if err := p.Shutdown(sctx); err != nil {
			log.Warn("tracing: spans not exported at shutdown are lost", "error", err)
		}
	}, nil
}
