// Package otlp builds a process's OpenTelemetry tracer provider from the
// standard OTEL_* environment variables, exporting spans over OTLP (HTTP
// or gRPC) with the official Go SDK.
//
// # Configuration
//
// [New] reads the variables every OpenTelemetry SDK reads:
//
//	OTEL_TRACES_EXPORTER                 otlp or none (default: otlp when an endpoint is set)
//	OTEL_EXPORTER_OTLP_ENDPOINT          the collector, e.g. http://otel-collector:4318
//	OTEL_EXPORTER_OTLP_TRACES_ENDPOINT   the traces endpoint, over the one above
//	OTEL_EXPORTER_OTLP_PROTOCOL          http/protobuf (default) or grpc
//	OTEL_EXPORTER_OTLP_TRACES_PROTOCOL   the traces protocol, over the one above
//	OTEL_SERVICE_NAME                    service.name (default: the process's, e.g. lovia-worker)
//	OTEL_RESOURCE_ATTRIBUTES             more resource attributes, k=v,k=v
//	OTEL_TRACES_SAMPLER[_ARG]            the sampler (default parentbased_always_on)
//	OTEL_SDK_DISABLED                    true turns tracing off
//
// The exporters also read their headers, TLS, compression and timeout
// variables (OTEL_EXPORTER_OTLP_HEADERS, …), and the batch span processor
// its OTEL_BSP_* ones (OTEL_BSP_SCHEDULE_DELAY: how often spans are sent,
// default 5000 ms). With none of the endpoint or exporter variables set
// tracing is off: [Provider.TracerProvider] is OpenTelemetry's noop
// provider, spans cost nothing, nothing is exported and no goroutine
// runs.
//
// A process builds one [Provider], passes [Provider.TracerProvider] to the
// fleet's components (their Config's Tracing field), and calls
// [Provider.Shutdown] when it stops, which exports the spans not exported
// yet. The spans themselves are described in package telemetry.
package otlp
