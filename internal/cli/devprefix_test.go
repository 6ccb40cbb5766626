package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// lovia dev --prefix names everything after the prefix: the banner's
// subjects to try and the shared object store of offloaded tool outputs.
func TestDevHonoursThePrefix(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	out, errb := &syncBuf{}, &syncBuf{}
	done := make(chan int, 1)
	args := []string{"dev", "--prefix", "ACME", "--nats-port", "0", "--http", "127.0.0.1:0", "--data", t.TempDir(),
		"--workspace", t.TempDir(), "--log-level", "warn", "--workers", "1"}
	go func() { done <- Main(ctx, args, strings.NewReader(""), out, errb, getenv(nil)) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			require.Equal(t, ExitOK, code, errb.String())
		case <-time.After(30 * time.Second):
			t.Error("lovia dev did not stop")
		}
	})
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "lovia run") },
		30*time.Second, 20*time.Millisecond, "waiting for the dev banner; stdout: %s stderr: %s", out.String(), errb.String())

	banner := out.String()
	require.Contains(t, banner, "nats sub 'ACME.events.*'")
	require.Contains(t, banner, "nats req ACME.api.submit ")
	require.NotContains(t, banner, "lovia.")

	url := strings.Fields(banner[strings.Index(banner, "NATS")+len("NATS"):])[0]
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = js.ObjectStore(ctx, "acme_results")
	require.NoError(t, err, "the results store is lower case, like the prefix's KV buckets")
}
