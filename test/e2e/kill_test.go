package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// proc is a child process with its output captured.
type proc struct {
	cmd *exec.Cmd
	mu  sync.Mutex
	out strings.Builder
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func startWorker(t testing.TB, url, agents, workspace, id string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"worker", "--nats", url, "--agents", agents, "--workspace", workspace,
		"--id", id, "--ack-wait", "30s", "--log-level", "debug"}, extra...)
	return startLovia(t, "worker "+id, nil, args...)
}

// startLovia runs the lovia binary with args (and env added to this
// process's environment) until the test ends: then SIGTERM, and SIGKILL
// after 20 s; its output is logged when the test failed.
func startLovia(t testing.TB, name string, env []string, args ...string) *proc {
	t.Helper()
	return startBinary(t, loviaBin, name, env, args...)
}

// startBinary starts bin (lovia, or a program built on the lovia
// package) as startLovia does.
func startBinary(t testing.TB, bin, name string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{}
	p.cmd = exec.Command(bin, args...)
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stdout, p.cmd.Stderr = p, p
	require.NoError(t, p.cmd.Start())
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _, _ = p.cmd.Process.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = p.cmd.Process.Kill()
				<-done
			}
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.output())
		}
	})
	return p
}

// startNATS starts a NATS server (JetStream on, temp store, a free port)
// with the fleet's streams provisioned (ack wait 30s), and connects to it.
func startNATS(t testing.TB) (*broker.Embedded, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	nc, err := nats.Connect(srv.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = bus.Provision(context.Background(), js, bus.ProvisionConfig{Workers: bus.WorkersConsumerConfig{AckWait: 30 * time.Second}})
	require.NoError(t, err)
	return srv, nc, js
}

// slowAgents writes an agents file with one agent per run, each appending
// three lines (its own) to log.txt around sleeps of sleep1 and sleep2 ms.
func slowAgents(t *testing.T, n, sleep1, sleep2 int) string {
	var b strings.Builder
	b.WriteString("agents:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `  - name: slow%d
    model: scripted
    tools: [append_file, sleep]
    script:
      - call: {name: append_file, args: {path: log.txt, line: "r%d-a"}, id: a}
      - call: {name: sleep, args: {ms: %d}, id: s1}
      - calls: [{name: append_file, args: {path: log.txt, line: "r%d-b"}, id: b}, {name: sleep, args: {ms: %d}, id: s2}]
      - call: {name: append_file, args: {path: log.txt, line: "r%d-c"}, id: c}
      - text: done %d
`, i, i, sleep1, i, sleep2, i, i)
	}
	path := filepath.Join(t.TempDir(), "agents.yaml")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	return path
}

// TestKill9 (fleet issue acceptance 3): two `lovia worker` processes run
// scripted runs with slow tools that append to a file; one is killed with
// SIGKILL mid-run. Every run completes on the other; no tool call whose
// result was checkpointed appears twice in the file; every run has exactly
// one terminal event and contiguous seqs.
func TestKill9(t *testing.T) {
	srv, nc, js := startNATS(t)
	ctx := context.Background()

	const runs = 6
	agents := slowAgents(t, runs, 2500, 300)
	workspace := t.TempDir()
	// The victim starts alone and claims every run, so the kill provably
	// interrupts runs it owns (with both workers up, the survivor could
	// claim them all).
	a := startWorker(t, srv.ClientURL(), agents, workspace, "victim")
	c, err := client.New(nc, client.Options{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := c.Agents(ctx)
		return err == nil
	}, 20*time.Second, 50*time.Millisecond)

	ids := make([]string, runs)
	for i := range ids {
		rep, err := c.Submit(ctx, &bus.RunRequest{Agent: fmt.Sprintf("slow%d", i), Input: bus.TextInput("go")})
		require.NoError(t, err)
		ids[i] = rep.RunID
	}
	// Every run has written its first line on the victim; it now sleeps
	// (the slow agents' first sleep) while the survivor comes up.
	logPath := filepath.Join(workspace, "log.txt")
	require.Eventually(t, func() bool { return fileLines(logPath) >= runs }, 20*time.Second, 10*time.Millisecond)
	b := startWorker(t, srv.ClientURL(), agents, workspace, "survivor")
	require.Eventually(t, func() bool { return strings.Contains(b.output(), "serving agents") },
		20*time.Second, 10*time.Millisecond)
	require.Less(t, fileLines(logPath), 2*runs, "the victim finished its runs before the kill; lengthen the slow agents' sleeps")
	killed := time.Now()
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGKILL))
	_, _ = a.cmd.Process.Wait()

	// What was checkpointed at the moment of the kill.
	st, err := store.Open(ctx, js, store.Config{})
	require.NoError(t, err)
	checkpointed := map[string]bool{} // "<run>/<call>"
	for _, id := range ids {
		snap, err := st.Checkpointer().Load(ctx, id)
		if err != nil {
			continue
		}
		for _, e := range snap.Entries {
			if e.Kind == loop.KindToolResult {
				checkpointed[id+"/"+e.CallID] = true
			}
		}
	}

	// Every run completes, with one terminal event and contiguous seqs.
	resumed := 0
	var takeover time.Duration
	for i, id := range ids {
		for _, env := range completedRun(t, c, id, fmt.Sprintf("run %d", i)) {
			if env.Type == bus.EventRunResumed {
				resumed++
				if d := env.Time.Sub(killed); takeover == 0 || d < takeover {
					takeover = d
				}
			}
		}
	}
	require.Positive(t, resumed, "the killed worker had runs that another resumed")
	t.Logf("kill -9 → first run_resumed: %s (ack wait 30s)", takeover)
	// The takeover did not wait for the ack wait: the survivors saw the
	// victim's presence vanish and released its runs.
	require.Less(t, takeover, 15*time.Second, "takeover waited for the ack wait")

	// The file: each line at most twice, and once when its call was
	// checkpointed before the kill.
	counts := map[string]int{}
	for _, l := range readLines(t, logPath) {
		counts[l]++
	}
	for i, id := range ids {
		for _, call := range []string{"a", "b", "c"} {
			line := fmt.Sprintf("r%d-%s", i, call)
			n := counts[line]
			require.GreaterOrEqual(t, n, 1, "%s ran", line)
			if checkpointed[id+"/"+call] {
				require.Equal(t, 1, n, "%s was checkpointed before the kill and must not run again", line)
			} else {
				require.LessOrEqual(t, n, 2, "%s", line)
			}
		}
	}
}

// completedRun tails a run to its end and checks it completed with
// contiguous seqs 1..n and exactly one terminal event.
func completedRun(t *testing.T, c *client.Client, id, label string) []*bus.Envelope {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tail, err := c.Tail(ctx, id, bus.FromStart())
	require.NoError(t, err)
	defer func() { _ = tail.Close(context.Background()) }()
	var envs []*bus.Envelope
	for env, err := range tail.All(ctx) {
		require.NoError(t, err, label)
		envs = append(envs, env)
	}
	terminals := 0
	for j, env := range envs {
		require.EqualValues(t, j+1, env.Seq, "%s: contiguous seqs", label)
		if env.IsTerminal() {
			terminals++
		}
	}
	require.Equal(t, 1, terminals, "%s: one terminal event", label)
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type, "%s completes", label)
	return envs
}

func fileLines(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}

func readLines(t *testing.T, path string) []string {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}
