// Package telemetry is the fleet's OpenTelemetry tracing: the spans its
// components open, and the adapter from the loop's [loop.Tracer] to
// OpenTelemetry. Package otlp (below this one) builds a process's
// provider from the OTEL_* environment variables.
//
// # Spans
//
// One trace follows a run across processes:
//
//	POST /v1/runs          the gateway's HTTP server span
//	└─ submit              the API validates, indexes and enqueues the run
//	   └─ claim            a worker claims the run request (one per delivery:
//	      │                a redelivery after a crash is a second claim, on
//	      │                any worker, in the same trace)
//	      └─ run           the loop runs (or resumes) the run
//	         ├─ turn       one model turn and its tool calls
//	         │  ├─ model_call
//	         │  └─ tool_call
//	         │     └─ mcp_call / toolsvc_call → toolsvc_serve (the tool service's process)
//	         └─ handoff
//
// # No global state
//
// Components take a trace.TracerProvider in their Config (nil: noop) and
// never read OpenTelemetry's globals; the W3C trace context travels in
// NATS headers (the bus package's TraceContext: traceparent, tracestate),
// written and read with the W3C propagator whatever a process's global
// one is. With a noop provider every span is free: [LoopTracer] returns
// loop.NoopTracer, which the loop skips.
package telemetry
