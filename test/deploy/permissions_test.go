package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/cli"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// permissionsConf is the accounts and users file docs/nats.md documents.
const permissionsConf = deployDir + "/nats/permissions.conf"

// roleUsers are the users of permissions.conf and the environment
// variables their passwords come from.
var roleUsers = map[string]string{
	"worker":    "LOVIA_WORKER_PASSWORD",
	"gateway":   "LOVIA_GATEWAY_PASSWORD",
	"submitter": "LOVIA_SUBMITTER_PASSWORD",
	"tail":      "LOVIA_TAIL_PASSWORD",
	"approver":  "LOVIA_APPROVER_PASSWORD",
	"operator":  "LOVIA_OPERATOR_PASSWORD",
	"tools":     "LOVIA_TOOLS_PASSWORD",
	"admin":     "LOVIA_ADMIN_PASSWORD",
}

// TestPermissions starts a nats-server from deploy/nats/permissions.conf
// (only the listen address, JetStream and its store directory are added,
// as a node config gives them), then a gateway and a worker through the
// lovia commands under the gateway and worker users, and a client under
// the submitter user, whose run completes. The tail-only user follows that
// run; the approver follows a gated run and decides its call. None of them
// runs into a permission it lacks. The tail-only user is refused a
// decision and a submit (through the API and straight to the runs
// stream), and the approver a submit.
func TestPermissions(t *testing.T) {
	// t.Setenv: the server reads the passwords from the environment, so
	// this test does not run in parallel with the others.
	for user, env := range roleUsers {
		t.Setenv(env, "pw-"+user)
	}
	srv, log := startPermissionsServer(t)
	userURL := func(user string) string {
		u := url.URL{Scheme: "nats", User: url.UserPassword(user, "pw-"+user), Host: srv.Addr().String()}
		return u.String()
	}

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	// The gateway alone first: it provisions the streams and buckets and
	// answers the API under its own user.
	agents := filepath.Join(t.TempDir(), "agents.yaml")
	require.NoError(t, os.WriteFile(agents, []byte(agentsYAML), 0o600))
	startCommand(t, "lovia gateway on ", "gateway", "--nats", userURL("gateway"), "--http", "127.0.0.1:0", "--agents", agents)
	// The operator fills the agents registry before any worker ran (none
	// has created the fleet bucket its command reads yet).
	registryAgents := writeRegistryAgents(t)
	require.Contains(t, runAs(t, ctx, userURL("operator"), log, "agents", "apply", registryAgents), "created   planner")

	sub := connectAs(t, userURL("submitter"))
	c, err := client.New(sub, client.Options{})
	require.NoError(t, err)
	runID := bus.NewRunID()
	req := &bus.RunRequest{RunID: runID, Agent: "demo", Input: bus.TextInput("What is 12*7?")}
	var rep *bus.SubmitReply
	waitFor(t, ctx, "the gateway to answer lovia.api.submit for the submitter user", func() error {
		rep, err = c.Submit(ctx, req)
		if err != nil && !errors.Is(err, nats.ErrNoResponders) {
			t.Fatalf("submit as the submitter user: %v", err)
		}
		return err
	})
	require.Equal(t, runID, rep.RunID)
	st, err := c.Status(ctx, runID)
	require.NoError(t, err)
	require.Equal(t, bus.StateQueued, st.Status, "no worker is up yet: the run waits")

	// Then a worker claims and runs it.
	startCommand(t, "lovia worker ", "worker", "--nats", userURL("worker"), "--id", "w1", "--workspace", t.TempDir(), "--agents", agents)
	envs := tailToEnd(t, ctx, c, runID)
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type, "the run's last event")

	// A tail-only user follows the same run from its first event.
	tailer := connectAs(t, userURL("tail"))
	tc, err := client.New(tailer, client.Options{})
	require.NoError(t, err)
	page, err := c.ListRuns(ctx, &bus.RunsListRequest{Agent: "demo"})
	require.NoError(t, err, "the submitter lists runs")
	require.NotEmpty(t, page.Runs)
	_, err = c.DescribeRun(ctx, runID)
	require.NoError(t, err, "the submitter describes its run")
	tailed := tailToEnd(t, ctx, tc, runID)
	require.Equal(t, len(envs), len(tailed), "the tail-only user sees every event")

	// The approver decides a gated call of a run the submitter started;
	// it follows the run to see the call, and the tail-only user may not
	// decide it.
	gated := bus.NewRunID()
	_, err = c.Submit(ctx, &bus.RunRequest{RunID: gated, Agent: "gated", Input: bus.TextInput("say hi")})
	require.NoError(t, err)
	approver := connectAs(t, userURL("approver"))
	ac, err := client.New(approver, client.Options{})
	require.NoError(t, err)
	waitApprovalRequired(t, ctx, ac, gated)
	short0, cancelShort0 := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort0()
	_, err = tc.Approve(short0, gated, "c1", loop.Approve, "")
	require.Error(t, err, "the tail-only user decided a call")
	log.waitViolation(t, ctx, "tail", "lovia.api.run."+gated+".approve")
	log.forget("/user:tail")
	// The approver finds the run among those awaiting a decision, and
	// describes it.
	waitFor(t, ctx, "the approver's listing to show the gated run awaiting", func() error {
		page, err := ac.ListRuns(ctx, &bus.RunsListRequest{Awaiting: true})
		if err != nil {
			return err
		}
		for _, r := range page.Runs {
			if r.RunID == gated {
				return nil
			}
		}
		return fmt.Errorf("%d runs awaiting, not %s", len(page.Runs), gated)
	})
	desc, err := ac.DescribeRun(ctx, gated)
	require.NoError(t, err, "the approver describes the run")
	require.Equal(t, gated, desc.RunID)
	dec, err := ac.Approve(ctx, gated, "c1", loop.Approve, "looks fine")
	require.NoError(t, err)
	require.True(t, dec.Accepted, "the approver's decision")
	gatedEnvs := tailToEnd(t, ctx, c, gated)
	require.Equal(t, loop.EventRunCompleted, gatedEnvs[len(gatedEnvs)-1].Type, "the gated run's last event")

	require.Empty(t, log.violations(), "the fleet and its clients ran into permissions they lack:\n%s", strings.Join(log.violations(), "\n"))

	// The tail-only user cannot submit, through the API or straight to the
	// runs stream, and neither can the approver.
	refused := bus.NewRunID()
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort()
	_, err = tc.Submit(short, &bus.RunRequest{RunID: refused, Agent: "demo", Input: bus.TextInput("hi")})
	require.Error(t, err, "the tail-only user submitted a run")
	log.waitViolation(t, ctx, "tail", "lovia.api.submit")

	js, err := jetstream.New(tailer)
	require.NoError(t, err)
	short2, cancelShort2 := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort2()
	_, err = js.Publish(short2, "lovia.submit.demo", []byte(`{"run_id":"`+refused+`","input":"hi"}`))
	require.Error(t, err, "the tail-only user published a run request to the runs stream")
	log.waitViolation(t, ctx, "tail", "lovia.submit.demo")

	short3, cancelShort3 := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort3()
	_, err = ac.Submit(short3, &bus.RunRequest{RunID: refused, Agent: "demo", Input: bus.TextInput("hi")})
	require.Error(t, err, "the approver submitted a run")
	log.waitViolation(t, ctx, "approver", "lovia.api.submit")
	// The approver reads statuses (the run it would decide on).
	st, err = ac.Status(ctx, runID)
	require.NoError(t, err)
	require.Equal(t, bus.StateCompleted, st.Status)

	// None of the refused requests reached the fleet.
	_, err = c.Status(ctx, refused)
	var apiErr *bus.APIError
	require.ErrorAs(t, err, &apiErr, "status of a run nobody could submit")
	require.Equal(t, bus.TypeNotFound, apiErr.Type)
	log.forget("/user:tail")
	log.forget("/user:approver")

	checkFeaturesUnderRoles(t, ctx, userURL, log, c, registryAgents)
}

// agentsYAML is the agents file of the test's gateway and worker: the demo
// agent, and a scripted one whose echo call needs an approval.
const agentsYAML = `agents:
  - name: demo
    model: demo
    tools: [calculator, time_now]
  - name: gated
    model: scripted
    tools: [echo]
    approval: [echo]
    script:
      - call: {name: echo, args: {text: hi}, id: c1}
      - text: done
`

// waitApprovalRequired follows a run until it asks for a decision.
func waitApprovalRequired(t *testing.T, ctx context.Context, c *client.Client, runID string) {
	t.Helper()
	tail, err := c.Tail(ctx, runID, bus.FromStart())
	require.NoError(t, err)
	defer tail.Close(context.Background())
	var seen []string
	for env, err := range tail.All(ctx) {
		require.NoError(t, err, "tail %s, waiting for approval_required after %v", runID, seen)
		if env.Type == loop.EventApprovalRequired {
			return
		}
		seen = append(seen, string(env.Type))
	}
	t.Fatalf("run %s ended without asking for a decision: %v", runID, seen)
}

// startPermissionsServer parses permissions.conf with the server's own
// parser (warnings fail the test) and starts it with a loopback listener
// and JetStream on a temporary store, which a node config would give.
func startPermissionsServer(t *testing.T) (*server.Server, *violationLog) {
	t.Helper()
	opts, err := server.ProcessConfigFile(permissionsConf)
	require.NoError(t, err, "%s does not parse", permissionsConf)
	require.NoError(t, new(server.Options).ProcessConfigFile(permissionsConf), "%s parses with warnings", permissionsConf)
	require.NotEmpty(t, opts.Accounts, "%s defines no accounts", permissionsConf)
	for _, u := range opts.Users {
		_, ok := roleUsers[u.Username]
		require.True(t, ok, "%s: user %s has no password variable in this test", permissionsConf, u.Username)
	}
	require.Len(t, opts.Users, len(roleUsers), "%s: users", permissionsConf)

	opts.Host, opts.Port = "127.0.0.1", server.RANDOM_PORT
	opts.JetStream, opts.StoreDir = true, filepath.Join(t.TempDir(), "jetstream")
	opts.NoSigs = true
	s, err := server.NewServer(opts)
	require.NoError(t, err)
	log := &violationLog{}
	s.SetLoggerV2(log, false, false, false)
	s.Start()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	require.True(t, s.ReadyForConnections(10*time.Second), "the server from %s is not ready", permissionsConf)
	return s, log
}

// connectAs connects with a user's URL and reports async errors to no one
// (the server log records violations).
func connectAs(t *testing.T, u string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(u, nats.Timeout(5*time.Second), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

// startCommand runs a lovia command until the test ends and waits until it
// writes ready to stderr.
func startCommand(t *testing.T, ready string, args ...string) *syncBuffer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	var code int
	done := make(chan struct{})
	go func() {
		defer close(done)
		code = cli.Main(ctx, args, strings.NewReader(""), out, out, func(string) string { return "" })
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("lovia %s did not stop within 30s:\n%s", args[0], out.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), ready) {
		select {
		case <-done:
			t.Fatalf("lovia %s exited with %d before it was ready:\n%s", args[0], code, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("lovia %s did not print %q within 30s:\n%s", args[0], ready, out.String())
		}
	}
	return out
}

// tailToEnd tails a run from its first event to its terminal one.
func tailToEnd(t *testing.T, ctx context.Context, c *client.Client, runID string) []*bus.Envelope {
	t.Helper()
	tail, err := c.Tail(ctx, runID, bus.FromStart())
	require.NoError(t, err)
	defer tail.Close(context.Background())
	var out []*bus.Envelope
	for env, err := range tail.All(ctx) {
		require.NoError(t, err, "tail %s after %d events", runID, len(out))
		out = append(out, env)
	}
	require.NotEmpty(t, out, "tail %s", runID)
	return out
}

// waitFor retries f until it succeeds or ctx ends, then fails naming what
// it waited for.
func waitFor(t *testing.T, ctx context.Context, what string, f func() error) {
	t.Helper()
	for {
		err := f()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waited for %s: %v", what, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// violationLog is the server's logger: it keeps the permission violations
// it reports, with the user they came from.
type violationLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *violationLog) record(format string, v ...any) {
	line := fmt.Sprintf(format, v...)
	if strings.Contains(line, "Violation") {
		l.mu.Lock()
		l.lines = append(l.lines, line)
		l.mu.Unlock()
	}
}

// forget drops the violations whose line contains s (those a test
// provoked and has checked).
func (l *violationLog) forget(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = slices.DeleteFunc(l.lines, func(line string) bool { return strings.Contains(line, s) })
}

func (l *violationLog) violations() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// waitViolation waits until the server reports a violation by user on
// subject.
func (l *violationLog) waitViolation(t *testing.T, ctx context.Context, user, subject string) {
	t.Helper()
	waitFor(t, ctx, fmt.Sprintf("the server to refuse user %s on %s", user, subject), func() error {
		for _, line := range l.violations() {
			if strings.Contains(line, "/user:"+user+`"`) && strings.Contains(line, `"`+subject+`"`) {
				return nil
			}
		}
		return errors.New("violations so far:\n" + strings.Join(l.violations(), "\n"))
	})
}

func (l *violationLog) Noticef(format string, v ...any) {}
func (l *violationLog) Warnf(format string, v ...any)   { l.record(format, v...) }
func (l *violationLog) Fatalf(format string, v ...any)  { l.record(format, v...) }
func (l *violationLog) Errorf(format string, v ...any)  { l.record(format, v...) }
func (l *violationLog) Debugf(format string, v ...any)  {}
func (l *violationLog) Tracef(format string, v ...any)  {}

// syncBuffer is a strings.Builder safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestPermissionsCoverEveryAsset reads permissions.conf and checks that
// every KV bucket and object store the code names (each bus.Names method
// ending in Bucket, found by reflection, so a new one is checked without
// touching this test) can be written by some role, and every stream
// (each method ending in Stream) reached through the JetStream API: a
// feature whose store no role may write fails here, not in production
// with a publish violation and a timeout.
func TestPermissionsCoverEveryAsset(t *testing.T) {
	for user, env := range roleUsers { // the file reads them; not parallel
		t.Setenv(env, "pw-"+user)
	}
	opts, err := server.ProcessConfigFile(permissionsConf)
	require.NoError(t, err)
	allowed := func(subject string) []string {
		var who []string
		for _, u := range opts.Users {
			p := u.Permissions
			if p == nil || p.Publish == nil {
				continue
			}
			match := func(filters []string) bool {
				return slices.ContainsFunc(filters, func(f string) bool { return server.SubjectMatchesFilter(subject, f) })
			}
			if match(p.Publish.Allow) && !match(p.Publish.Deny) {
				who = append(who, u.Username)
			}
		}
		return who
	}
	names, err := bus.NewNames("")
	require.NoError(t, err)
	v := reflect.ValueOf(names)
	var buckets, streams int
	for i := range v.NumMethod() {
		m := v.Type().Method(i)
		if m.Type.NumIn() != 1 || m.Type.NumOut() != 1 || m.Type.Out(0).Kind() != reflect.String {
			continue
		}
		name := v.Method(i).Call(nil)[0].String()
		switch {
		case strings.HasSuffix(m.Name, "Bucket"):
			buckets++
			kv, obj := allowed("$KV."+name+".key"), allowed("$O."+name+".M.key")
			require.True(t, len(kv)+len(obj) > 0, "%s: no role may write %s (bus.Names.%s): allow $KV.%s.> or $O.%s.> to the roles that use it", permissionsConf, name, m.Name, name, name)
		case strings.HasSuffix(m.Name, "Stream"):
			streams++
			require.NotEmpty(t, allowed("$JS.API.STREAM.INFO."+name), "%s: no role may reach stream %s (bus.Names.%s)", permissionsConf, name, m.Name)
		}
	}
	require.GreaterOrEqual(t, buckets, 10, "bus.Names bucket methods found")
	require.GreaterOrEqual(t, streams, 4, "bus.Names stream methods found")
}
