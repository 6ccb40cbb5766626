package deploy_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// TestTenants starts a nats-server from deploy/nats/tenants.conf and a
// fleet (a `lovia worker`) in tenant A only. With A's credentials the
// fleet works; with B's, nothing of A's is reachable: B cannot submit to
// A's agents, subscribe to A's events, approve A's calls or read A's KV
// buckets — the accounts are separate subject spaces with their own
// JetStream.
func TestTenants(t *testing.T) {
	userURL := startTenantsServer(t)

	agents := filepath.Join(t.TempDir(), "agents.yaml")
	require.NoError(t, os.WriteFile(agents, []byte(`
agents:
  - name: helper
    model: scripted
    tools: [echo]
    approval: [echo]
    script:
      - call: {name: echo, args: {text: hi}, id: c1}
      - text: done
`), 0o600))
	startCommand(t, "serving agents helper", "worker", "--nats", userURL("a-fleet", "TENANT_A_FLEET_PASSWORD"),
		"--agents", agents, "--workspace", t.TempDir())

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	a := connectAs(t, userURL("a-client", "TENANT_A_CLIENT_PASSWORD"))
	b := connectAs(t, userURL("b-client", "TENANT_B_CLIENT_PASSWORD"))
	ca, err := client.New(a, client.Options{})
	require.NoError(t, err)
	cb, err := client.New(b, client.Options{})
	require.NoError(t, err)

	// B listens on the events subjects of its own account (where A's run
	// would show up if the accounts shared subjects).
	seenByB := make(chan *nats.Msg, 16)
	sub, err := b.ChanSubscribe("lovia.events.>", seenByB)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	require.NoError(t, b.Flush())

	var rep *bus.SubmitReply
	waitFor(t, ctx, "tenant A's fleet to answer its submit", func() error {
		rep, err = ca.Submit(ctx, &bus.RunRequest{Agent: "helper", Input: bus.TextInput("go")})
		return err
	})
	tail, err := ca.Tail(ctx, rep.RunID, bus.FromStart())
	require.NoError(t, err)
	defer func() { _ = tail.Close(context.Background()) }()
	for env, err := range tail.All(ctx) {
		require.NoError(t, err)
		if env.Type == loop.EventApprovalRequired {
			// B cannot approve A's call: A's API is not in B's account.
			_, err := cb.Approve(ctx, rep.RunID, "c1", loop.Approve, "")
			require.True(t, errors.Is(err, nats.ErrNoResponders), "tenant B reached tenant A's API: %v", err)
			_, err = ca.Approve(ctx, rep.RunID, "c1", loop.Approve, "")
			require.NoError(t, err)
		}
		if env.IsTerminal() {
			require.Equal(t, loop.EventRunCompleted, env.Type, "tenant A's run completes")
		}
	}

	// B cannot submit to A's agents, read A's run, or open A's buckets.
	_, err = cb.Submit(ctx, &bus.RunRequest{Agent: "helper", Input: bus.TextInput("x")})
	require.True(t, errors.Is(err, nats.ErrNoResponders), "tenant B's submit reached tenant A's fleet: %v", err)
	_, err = cb.Status(ctx, rep.RunID)
	require.True(t, errors.Is(err, nats.ErrNoResponders), "tenant B read tenant A's run: %v", err)
	jsb, err := jetstream.New(b)
	require.NoError(t, err)
	_, err = jsb.KeyValue(ctx, "lovia_runs")
	require.ErrorIs(t, err, jetstream.ErrBucketNotFound, "tenant B opened tenant A's run index")
	_, err = jsb.Stream(ctx, "LOVIA_EVENTS")
	require.ErrorIs(t, err, jetstream.ErrStreamNotFound, "tenant B opened tenant A's events")
	select {
	case m := <-seenByB:
		t.Fatalf("tenant B saw an event of tenant A's run on %s", m.Subject)
	default:
	}
}

// startTenantsServer starts a nats-server from deploy/nats/tenants.conf
// (stopped at cleanup) and returns the URL of one of its users, whose
// password is "pw-" + the environment variable the config reads it from.
func startTenantsServer(t *testing.T) (userURL func(user, env string) string) {
	t.Helper()
	for _, v := range []string{"TENANT_A_FLEET_PASSWORD", "TENANT_A_CLIENT_PASSWORD", "TENANT_B_FLEET_PASSWORD", "TENANT_B_CLIENT_PASSWORD"} {
		t.Setenv(v, "pw-"+v)
	}
	conf := deployDir + "/nats/tenants.conf"
	opts, err := server.ProcessConfigFile(conf)
	require.NoError(t, err, "%s does not parse", conf)
	require.NoError(t, new(server.Options).ProcessConfigFile(conf), "%s parses with warnings", conf)
	opts.Host, opts.Port = "127.0.0.1", server.RANDOM_PORT
	opts.JetStream, opts.StoreDir, opts.NoSigs, opts.NoLog = true, filepath.Join(t.TempDir(), "js"), true, true
	s, err := server.NewServer(opts)
	require.NoError(t, err)
	s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	require.True(t, s.ReadyForConnections(10*time.Second))
	return func(user, env string) string {
		return (&url.URL{Scheme: "nats", User: url.UserPassword(user, "pw-"+env), Host: s.Addr().String()}).String()
	}
}
