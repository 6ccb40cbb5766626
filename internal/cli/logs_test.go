package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// jsonLines decodes every line of s as a JSON object, failing on one that
// is not.
func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), "a line of a JSON log is not JSON: %q", line)
		out = append(out, m)
	}
	return out
}

// With --log-format json every line a worker writes is JSON: its
// durations as Go durations ("30s", not 30000000000), and an error that
// stops it as it starts as a line at level ERROR.
func TestWorkerJSONLogs(t *testing.T) {
	t.Parallel()
	var errb syncBuf
	code := Main(context.Background(), []string{"worker", "--log-format", "json", "--nats-wait", "0", "--nats", "nats://127.0.0.1:1"}, nil, &syncBuf{}, &errb, getenv(nil))
	require.Equal(t, ExitFailure, code)
	lines := jsonLines(t, errb.String())
	last := lines[len(lines)-1]
	require.Equal(t, "ERROR", last["level"])
	require.Contains(t, last["msg"], "lovia: cannot connect to NATS at nats://127.0.0.1:1")

	// The gateway and dev too, by the flag or by $LOVIA_LOG_FORMAT.
	errb = syncBuf{}
	code = Main(context.Background(), []string{"gateway", "--nats-wait", "0", "--nats", "nats://127.0.0.1:1", "--http", "127.0.0.1:0"}, nil, &syncBuf{}, &errb,
		getenv(map[string]string{"LOVIA_LOG_FORMAT": "json"}))
	require.Equal(t, ExitFailure, code)
	lines = jsonLines(t, errb.String())
	require.Equal(t, "ERROR", lines[len(lines)-1]["level"])
	require.Contains(t, lines[len(lines)-1]["msg"], "lovia: cannot connect to NATS")
	errb = syncBuf{}
	code = Main(context.Background(), []string{"dev", "--log-format", "json", "--agents", "/nonexistent/agents.yaml"}, nil, &syncBuf{}, &errb, getenv(nil))
	require.Equal(t, ExitFailure, code)
	lines = jsonLines(t, errb.String())
	require.Contains(t, lines[len(lines)-1]["msg"], "lovia: agents file")

	srv := startJetStream(t)
	ctx, cancel := context.WithCancel(context.Background())
	werr := &syncBuf{}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"worker", "--log-format", "json", "--nats", srv.ClientURL(), "--workspace", t.TempDir()}, nil, &syncBuf{}, werr, getenv(nil))
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the worker did not stop")
		}
	})
	require.Eventually(t, func() bool { return strings.Contains(werr.String(), "serving agents demo") }, 30*time.Second, 20*time.Millisecond,
		"waiting for the worker to start: %s", werr.String())
	var started map[string]any
	for _, l := range jsonLines(t, werr.String()) {
		if l["msg"] == "worker started" {
			started = l
		}
	}
	require.NotNil(t, started, werr.String())
	require.Equal(t, "30s", started["ack_wait"])
}
