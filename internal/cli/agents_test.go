package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agents.yaml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

func greeter(text string) string {
	return "agents:\n  - name: greeter\n    model: scripted\n    script:\n      - text: " + text + "\n"
}

// lovia agents apply / ls / get / history / rm, and a `lovia worker
// --registry` that serves what was applied and follows an update without a
// restart.
func TestAgentsRegistryCommands(t *testing.T) {
	srv := startJetStream(t)
	url := srv.ClientURL()
	env := getenv(map[string]string{"NATS_URL": url})
	ctx := context.Background()
	lovia := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := Main(ctx, args, strings.NewReader(""), &out, &errb, env)
		return out.String(), errb.String(), code
	}

	out, errs, code := lovia("agents", "apply", writeFile(t, greeter("hello one")))
	require.Equal(t, ExitOK, code, errs)
	require.Contains(t, out, "created   greeter")
	require.Contains(t, errs, "no live worker serves agent greeter: start a worker with --registry")
	_, errs, code = lovia("agents", "apply", writeFile(t, "agents:\n  - name: bad\n    model: scripted\n    tools: [teleport]\n    script:\n      - text: x\n"))
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errs, "teleport", "an invalid definition is refused with the agents file's error")

	wctx, stop := context.WithCancel(ctx)
	werr := &syncBuf{}
	done := make(chan int, 1)
	go func() {
		done <- Main(wctx, []string{"worker", "--registry", "--serve", "greet*", "--workspace", t.TempDir(), "--log-level", "warn"}, strings.NewReader(""), &syncBuf{}, werr, env)
	}()
	t.Cleanup(func() {
		stop()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the worker did not stop")
		}
	})
	require.Eventually(t, func() bool { return strings.Contains(werr.String(), "serving agents greeter") }, 20*time.Second, 20*time.Millisecond, werr.String())

	nc, err := nats.Connect(url)
	require.NoError(t, err)
	defer nc.Close()
	c, err := client.New(nc, client.Options{})
	require.NoError(t, err)
	runOutput := func() string {
		rep, err := c.Submit(ctx, &bus.RunRequest{Agent: "greeter", Input: bus.TextInput("hi")})
		require.NoError(t, err)
		tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		tail, err := c.Tail(tctx, rep.RunID, bus.FromStart())
		require.NoError(t, err)
		defer func() { _ = tail.Close(ctx) }()
		for env, err := range tail.All(tctx) {
			require.NoError(t, err)
			if env.Type == loop.EventRunCompleted {
				ev, err := env.Event()
				require.NoError(t, err)
				return ev.(*loop.RunCompleted).Output.(string)
			}
		}
		return ""
	}
	require.Equal(t, "hello one", runOutput())
	// In a registry fleet, an unknown agent is defined with agents apply.
	_, errs, code = lovia("submit", "--agent", "nobody", "hi")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errs, "define nobody in the agents registry: lovia agents apply FILE")

	_, errs, code = lovia("agents", "apply", writeFile(t, greeter("hello two")))
	require.Equal(t, ExitOK, code, errs)
	require.NotContains(t, errs, "no live worker serves", "the registry's worker picks the update up")
	// A new agent: the registry's worker serves it within a second, and
	// apply waits for that rather than warn at once.
	out, errs, code = lovia("agents", "apply", writeFile(t, "agents:\n  - name: greeter2\n    model: scripted\n    script:\n      - text: hey\n"))
	require.Equal(t, ExitOK, code, errs)
	require.Contains(t, out, "created   greeter2")
	require.NotContains(t, errs, "no live worker serves", "the registry's worker picks the new agent up")
	_, errs, code = lovia("agents", "rm", "greeter2")
	require.Equal(t, ExitOK, code, errs)
	require.Eventually(t, func() bool { return runOutput() == "hello two" }, 20*time.Second, 100*time.Millisecond,
		"the worker never served the updated definition")

	out, errs, code = lovia("agents", "ls")
	require.Equal(t, ExitOK, code, errs)
	require.Contains(t, out, "greeter")
	require.Regexp(t, `greeter\s+registry\s+\d+\s+scripted\s+-\s+1\n`, out, "one live worker serves it")
	out, errs, code = lovia("agents", "ls", "--json")
	require.Equal(t, ExitOK, code, errs)
	require.Contains(t, out, `"source": "registry"`)
	out, errs, code = lovia("agents", "history", "greeter", "--json")
	require.Equal(t, ExitOK, code, errs)
	require.Equal(t, 2, strings.Count(out, `"revision"`), out)
	out, errs, code = lovia("agents", "history", "greeter")
	require.Equal(t, ExitOK, code, errs)
	require.Regexp(t, `(?s)^revision \d+  \S+  created\n  model: "scripted"\n  name: "greeter"\n  script\[0\]\.text: "hello one"\nrevision \d+  \S+  updated\n  - script\[0\]\.text: "hello one"\n  \+ script\[0\]\.text: "hello two"\n$`, out,
		"the first revision in full, the second as its change")
	out, _, code = lovia("agents", "get", "greeter")
	require.Equal(t, ExitOK, code)
	require.Contains(t, out, "hello two")
	_, errs, code = lovia("agents", "get", "nobody")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errs, "lovia agents ls")
	_, errs, code = lovia("agents", "rm", "greeter")
	require.Equal(t, ExitOK, code, errs)
	require.Eventually(t, func() bool {
		out, _, _ = lovia("agents", "ls")
		return strings.Contains(out, "no agents: the registry holds none")
	}, 20*time.Second, 100*time.Millisecond, "waiting for the worker to stop serving the removed agent: %s", out)
	// Its runs wait, queued, and say what brings the agent back.
	out, errs, code = lovia("submit", "--agent", "greeter", "hi")
	require.Equal(t, ExitOK, code, errs)
	waiting := strings.TrimSpace(out)
	require.Eventually(t, func() bool {
		out, _, _ = lovia("status", waiting)
		return strings.Contains(out, `no worker serves agent "greeter"; the run starts when one does: lovia agents apply a file that defines it`)
	}, 20*time.Second, 100*time.Millisecond, "waiting for the queued run's status to say why it waits: %s", out)
}
