package service

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
)

// TestRequestsServedConcurrently (issue 16): a request that takes long
// does not hold up the ones behind it. Served in order, one submit's round
// trips to JetStream would bound the whole API; here the first status
// request is held until a second one, sent after it to the same endpoint,
// has been answered.
func TestRequestsServedConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	api := oneRunAPI(t)
	svc := New(api)
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	svc.serving = func(subject string) {
		if !strings.HasSuffix(subject, ".status") {
			return
		}
		held := false
		once.Do(func() { held = true })
		if held {
			close(started)
			<-release
		}
	}
	var unheld sync.Once
	unhold := func() { unheld.Do(func() { close(release) }) }
	require.NoError(t, svc.Start(ctx))
	t.Cleanup(func() {
		unhold()
		_ = svc.Stop(ctx)
	})
	cl, err := client.New(api.cfg.Conn, client.Options{Timeout: 20 * time.Second})
	require.NoError(t, err)

	first := make(chan error, 1)
	go func() {
		_, err := cl.Status(ctx, "r1")
		first <- err
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the first status request was not served within 10s")
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := cl.Status(sctx, "r1")
	require.NoError(t, err, "a status request waited for the held one before it: the service serves one request at a time")
	require.Equal(t, bus.StateQueued, st.Status)
	unhold()
	require.NoError(t, <-first)
}
