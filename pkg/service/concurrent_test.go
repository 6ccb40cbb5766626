package service

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
)

// TestRequestsServedConcurrently (issue 16): a request that takes long
// does not hold up the ones behind it. Served in order, one submit's round
// trips to JetStream would bound the whole API; here the first status
// request is held until a second one, sent after it to the same endpoint
// about another run, has been answered.
func TestRequestsServedConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	api := oneRunAPI(t)
	svc := New(api)
	started := make(chan struct{})
	unhold := startHolding(t, svc, func(subject string) bool { return strings.HasSuffix(subject, ".status") },
		func(_ string, held bool) {
			if held {
				close(started)
			}
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
	// Another run's status (an unknown one: answered not found).
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = cl.Status(sctx, "r2")
	var ae *bus.APIError
	require.ErrorAs(t, err, &ae, "a status request waited for the held one before it: the service serves one request at a time")
	require.Equal(t, bus.TypeNotFound, ae.Type)
	unhold()
	require.NoError(t, <-first)
}

// TestRunRequestsServedInOrder: requests about one run are served one at
// a time, in the order they came (two injects sent without waiting reach
// the run in that order), while another run's are served meanwhile.
func TestRunRequestsServedInOrder(t *testing.T) {
	t.Parallel()
	api := oneRunAPI(t)
	svc := New(api)
	started := make(chan string, 8)
	unhold := startHolding(t, svc, func(subject string) bool { return strings.Contains(subject, ".run.r1.") },
		func(subject string, _ bool) { started <- subject })
	nc := api.cfg.Conn
	ask := func(subject string) chan *nats.Msg {
		reply := make(chan *nats.Msg, 1)
		inbox := nc.NewRespInbox()
		sub, err := nc.ChanSubscribe(inbox, reply)
		require.NoError(t, err)
		t.Cleanup(func() { _ = sub.Unsubscribe() })
		require.NoError(t, nc.PublishRequest(subject, inbox, nil))
		return reply
	}
	next := func() string {
		t.Helper()
		select {
		case s := <-started:
			return s
		case <-time.After(10 * time.Second):
			t.Fatal("no request was served within 10s")
			return ""
		}
	}
	first := ask("lovia.api.run.r1.status")
	require.Equal(t, "lovia.api.run.r1.status", next())
	second := ask("lovia.api.run.r1.status")
	other := ask("lovia.api.run.r2.status")
	require.Equal(t, "lovia.api.run.r2.status", next(), "another run's request is served while r1's first is held")
	select {
	case <-other:
	case <-time.After(10 * time.Second):
		t.Fatal("r2's status was not answered within 10s")
	}
	select {
	case s := <-started:
		t.Fatalf("%s was served while r1's first request was (its requests are served in order)", s)
	case <-second:
		t.Fatal("r1's second request was answered before its first")
	case <-time.After(200 * time.Millisecond):
	}
	unhold()
	require.Equal(t, "lovia.api.run.r1.status", next())
	for _, c := range []chan *nats.Msg{first, second} {
		select {
		case <-c:
		case <-time.After(10 * time.Second):
			t.Fatal("an r1 status was not answered within 10s")
		}
	}
}

// startHolding starts svc, holding the first request whose subject held
// matches until the returned unhold is called (at cleanup at the latest).
// served, called as each request starts, learns whether it is the held one.
func startHolding(t *testing.T, svc *Service, held func(subject string) bool, served func(subject string, held bool)) (unhold func()) {
	t.Helper()
	release := make(chan struct{})
	var first sync.Once
	svc.serving = func(subject string) {
		hold := false
		if held(subject) {
			first.Do(func() { hold = true })
		}
		served(subject, hold)
		if hold {
			<-release
		}
	}
	var unheld sync.Once
	unhold = func() { unheld.Do(func() { close(release) }) }
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(func() {
		unhold()
		_ = svc.Stop(context.Background())
	})
	return unhold
}
