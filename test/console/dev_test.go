package console

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// TestConsoleOnLoviaDev opens the console that `lovia dev` (the binary,
// as a user starts it) serves: a gated run submitted over HTTP shows up on
// the runs page, is approved with a click on its page, and completes.
func TestConsoleOnLoviaDev(t *testing.T) {
	dir := t.TempDir()
	agents := filepath.Join(dir, "agents.yaml")
	require.NoError(t, os.WriteFile(agents, []byte(agentsYAML), 0o644))
	var mu sync.Mutex
	out := &strings.Builder{}
	dev := exec.Command(loviaBin, "dev", "--agents", agents, "--http", "127.0.0.1:0", "--nats-port", "0",
		"--data", filepath.Join(dir, "data"), "--workspace", filepath.Join(dir, "ws"), "--log-level", "warn")
	dev.Stdout = writerFunc(func(b []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(b) })
	dev.Stderr = dev.Stdout
	require.NoError(t, dev.Start())
	t.Cleanup(func() {
		_ = dev.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _, _ = dev.Process.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = dev.Process.Kill()
			<-done
		}
		if t.Failed() {
			mu.Lock()
			t.Logf("lovia dev output:\n%s", out.String())
			mu.Unlock()
		}
	})
	re := regexp.MustCompile(`HTTP\s+(http://\S+)`)
	var base string
	deadline := time.Now().Add(60 * time.Second)
	for base == "" {
		mu.Lock()
		printed := out.String()
		mu.Unlock()
		if m := re.FindStringSubmatch(printed); m != nil {
			base = m[1]
			break
		}
		require.True(t, time.Now().Before(deadline), "waited 60s for lovia dev to print its HTTP address:\n%s", printed)
		time.Sleep(50 * time.Millisecond) // polling the process's output, with a deadline
	}

	var runID string
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for runID == "" {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/runs", strings.NewReader(`{"agent":"gated","input":"go"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			var rep struct {
				RunID string `json:"run_id"`
			}
			if resp.StatusCode == http.StatusAccepted {
				_ = json.NewDecoder(resp.Body).Decode(&rep)
			}
			resp.Body.Close()
			runID = rep.RunID
		}
		require.NoError(t, ctx.Err(), "waited for lovia dev to accept a submit: %v", err)
		if runID == "" {
			time.Sleep(100 * time.Millisecond) // the fleet is still starting
		}
	}

	b := newBrowser(t, t.TempDir())
	const long = 45 * time.Second
	b.open(base + "/#/runs?awaiting=true")
	row := `#runs-list tr[data-run-id="` + runID + `"]`
	b.visible("the gated run in the runs awaiting a person", row, long)
	b.do("opening the run from the list", long, chromedp.Click(chromedp.CSS(row+" a")))
	approve := `.tool[data-call-id="write1"] button.approve`
	b.visible("the approve button of the gated call", approve, long)
	b.do("clicking approve", long, chromedp.Click(chromedp.CSS(approve)))
	b.visible("the run's completion", `.ev.outcome.completed`, long)
	notes, err := os.ReadFile(filepath.Join(dir, "ws", "notes.txt"))
	require.NoError(t, err, "the approved call wrote the note")
	require.Equal(t, "hello from the console\n", string(notes))
}
