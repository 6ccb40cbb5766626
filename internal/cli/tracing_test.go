package cli

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTracingConfigErrors: a worker, gateway or dev whose OTEL_* variables
// ask for what it cannot do refuses to start, naming the variable and the
// values it takes, before it connects anywhere.
func TestTracingConfigErrors(t *testing.T) {
	t.Parallel()
	for _, cmd := range [][]string{
		{"worker", "--nats", "nats://127.0.0.1:1"},
		{"gateway", "--nats", "nats://127.0.0.1:1", "--http", "127.0.0.1:0"},
		{"dev", "--nats-port", "0", "--http", "127.0.0.1:0", "--data", t.TempDir()},
	} {
		t.Run(cmd[0], func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}
			code, _, stderr := runCLI(t, func(k string) string { return env[k] }, cmd...)
			require.NotEqual(t, ExitOK, code)
			require.Contains(t, stderr, "OTEL_EXPORTER_OTLP_PROTOCOL=http/json is not supported: set http/protobuf or grpc")
		})
	}
}
