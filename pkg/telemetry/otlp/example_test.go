package otlp_test

import (
	"context"
	"fmt"

	"github.com/lovia-fleet/lovia/pkg/telemetry/otlp"
)

// A process builds its provider from the environment, hands
// TracerProvider to the fleet's components and shuts it down last. With
// no OTEL_* variable set, tracing is off.
func ExampleNew() {
	noEnv := func(string) string { return "" }
	p, err := otlp.New(context.Background(), otlp.Config{ServiceName: "lovia-worker", Getenv: noEnv})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = p.Shutdown(context.Background()) }()
	// worker.Config{…, Tracing: p.TracerProvider()}
	fmt.Println("tracing:", p, p.Enabled())

	_, err = otlp.New(context.Background(), otlp.Config{Getenv: func(k string) string {
		return map[string]string{"OTEL_TRACES_EXPORTER": "jaeger"}[k]
	}})
	fmt.Println(err)
	// Output:
	// tracing: off false
	// otlp: bad OpenTelemetry configuration: OTEL_TRACES_EXPORTER=jaeger is not supported: set otlp (with OTEL_EXPORTER_OTLP_ENDPOINT) or none
}
