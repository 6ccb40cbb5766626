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
	out, errb := serveDev(t, "--prefix", "ACME", "--workers", "1")
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
	_, err = js.ObjectStore(context.Background(), "acme_results")
	require.NoError(t, err, "the results store is lower case, like the prefix's KV buckets")
}
