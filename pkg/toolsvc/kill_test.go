package toolsvc_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/toolsvc"
)

const (
	callerEnv  = "LOVIA_TOOLSVC_CALLER"
	serviceEnv = "LOVIA_TOOLSVC_SERVICE"
)

var appendInfo = toolsvc.ToolInfo{Name: "files__append", Service: "files", Tool: "append", Subject: "lovia.tools.files.append"}

// callerMain is the caller process of TestKilledCallerDoesNotRunTwice: it
// calls append once per call id given, in order, printing each reply.
func callerMain() int {
	nc, err := nats.Connect(os.Getenv("NATS_URL"))
	if err != nil {
		fmt.Println("connect:", err)
		return 1
	}
	defer nc.Close()
	for _, id := range strings.Split(os.Getenv(callerEnv), ",") {
		tl, err := toolsvc.Tool(toolsvc.CallerConfig{Conn: nc, Timeout: time.Hour, CallOf: func(context.Context, *loop.RunContext) toolsvc.Call {
			return toolsvc.Call{RunID: "run-1", CallID: id, Agent: "writer"}
		}}, appendInfo)
		if err != nil {
			fmt.Println(err)
			return 1
		}
		out, err := tl.Func(context.Background(), nil, json.RawMessage(fmt.Sprintf(`{"line":%q}`, id)))
		fmt.Println("reply", id, out, err)
	}
	return 0
}

// serviceMain is the service process of TestKilledServiceCallIsTakenOver:
// files.append with the default dedupe, appending each line to the file
// named by serviceEnv and then holding the call until the process dies.
func serviceMain() int {
	nc, err := nats.Connect(os.Getenv("NATS_URL"))
	if err != nil {
		fmt.Println("connect:", err)
		return 1
	}
	defer nc.Close()
	hold := loop.NewTool("append", "Append a line to the file.", func(ctx context.Context, _ *loop.RunContext, in lineIn) (string, error) {
		f, err := os.OpenFile(os.Getenv(serviceEnv), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return "", err
		}
		_, err = fmt.Fprintln(f, in.Line)
		_ = f.Close()
		if err != nil {
			return "", err
		}
		<-ctx.Done() // until the kill
		return "", ctx.Err()
	})
	svc, err := toolsvc.New(toolsvc.Config{Conn: nc, Name: "files", Tools: []*loop.Tool{hold}, Dedupe: &toolsvc.Dedupe{}})
	if err == nil {
		err = svc.Start(context.Background())
	}
	if err != nil {
		fmt.Println(err)
		return 1
	}
	select {}
}

// setupListening is setup for the tests with a child process: the server
// listens on a TCP port, whose URL it returns with the connection.
func setupListening(t *testing.T) (*nats.Conn, string) {
	t.Helper()
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	nc, err := nats.Connect(srv.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc, srv.ClientURL()
}

// A service instance killed with SIGKILL while a call runs on it: its
// claim is no longer renewed, so the same call made again is run by
// another instance after the default lease (15s), not refused or left
// waiting for minutes.
func TestKilledServiceCallIsTakenOver(t *testing.T) {
	t.Parallel()
	nc, url := setupListening(t)

	file := filepath.Join(t.TempDir(), "lines.txt")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serviceEnv+"="+file, "NATS_URL="+url)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	discover(t, nc, "files", 1)
	callOf := func(context.Context, *loop.RunContext) toolsvc.Call {
		return toolsvc.Call{RunID: "run-1", CallID: "c1", Agent: "writer"}
	}
	tl := callerTool(t, nc, toolsvc.ServiceInfo{Tools: []toolsvc.ToolInfo{appendInfo}}, "files__append", callOf)
	go func() { // its reply never comes
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = tl.Func(ctx, nil, json.RawMessage(`{"line":"k"}`))
	}()
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(file)
		return string(b) == "k\n"
	}, 30*time.Second, 5*time.Millisecond, "waiting for the call to run on the service process")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()

	var runs atomic.Int64
	serve(t, toolsvc.Config{Conn: nc, Name: "files", Tools: counterTools(&runs, nil), Dedupe: &toolsvc.Dedupe{}})
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := tl.Func(ctx, nil, json.RawMessage(`{"line":"k"}`))
	require.NoError(t, err, "the call made again after the instance running it was killed")
	require.Equal(t, "appended k", out)
	require.EqualValues(t, 1, runs.Load())
	require.Less(t, time.Since(start), time.Minute, "the call waited for the dead instance's claim")
}

// A caller (a worker) killed with SIGKILL while its call runs: the call
// finishes on the service, and the caller that comes next with the same
// call ids gets the stored replies. The file has exactly one line per
// call, also for the call that was in flight at the kill.
func TestKilledCallerDoesNotRunTwice(t *testing.T) {
	t.Parallel()
	nc, url := setupListening(t)

	file := filepath.Join(t.TempDir(), "lines.txt")
	var mu sync.Mutex
	release := make(chan struct{})
	appendLine := loop.NewTool("append", "Append a line to the file.", func(ctx context.Context, _ *loop.RunContext, in lineIn) (string, error) {
		mu.Lock()
		f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			_, err = fmt.Fprintln(f, in.Line)
			_ = f.Close()
		}
		mu.Unlock()
		if err != nil {
			return "", err
		}
		if in.Line == "c3" { // the call in flight at the kill
			select {
			case <-release:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		return "appended " + in.Line, nil
	})
	serve(t, toolsvc.Config{Conn: nc, Name: "files", Tools: []*loop.Tool{appendLine}, Dedupe: &toolsvc.Dedupe{}})
	discover(t, nc, "files", 1)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), callerEnv+"=c1,c2,c3", "NATS_URL="+url)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	replies := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			replies <- sc.Text()
		}
		close(replies)
	}()
	for _, want := range []string{"reply c1 appended c1 <nil>", "reply c2 appended c2 <nil>"} {
		select {
		case got := <-replies:
			require.Equal(t, want, got)
		case <-time.After(30 * time.Second):
			t.Fatalf("waiting for the caller's %q", want)
		}
	}
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(file)
		return strings.HasSuffix(string(b), "c3\n")
	}, 30*time.Second, 5*time.Millisecond, "waiting for the third call to run on the service")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	for range replies { // the killed caller never got c3's reply
	}
	close(release)

	// The run's next owner calls again with the same call ids, and one more.
	for _, id := range []string{"c1", "c2", "c3", "c4"} {
		tl := callerTool(t, nc, toolsvc.ServiceInfo{Tools: []toolsvc.ToolInfo{appendInfo}}, "files__append", func(context.Context, *loop.RunContext) toolsvc.Call {
			return toolsvc.Call{RunID: "run-1", CallID: id, Agent: "writer"}
		})
		out, err := invoke(tl, fmt.Sprintf(`{"line":%q}`, id))
		require.NoError(t, err)
		require.Equal(t, "appended "+id, out)
	}
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, "c1\nc2\nc3\nc4\n", string(b))
}
