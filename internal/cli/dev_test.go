package cli

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
)

// lovia dev owns its embedded server: started on a store directory whose
// workers consumer allows fewer claims than its workers have slots (an
// older version's default), it raises the limit instead of keeping it.
func TestDevSizesTheClaimLimit(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: dir, Port: -1})
	require.NoError(t, err)
	nc, err := srv.Connect()
	require.NoError(t, err)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	pc := bus.ProvisionConfig{}
	pc.Workers.MaxAckPending = 1000
	_, err = bus.Provision(ctx, js, pc)
	require.NoError(t, err)
	require.NoError(t, bus.ProvisionAgents(ctx, js, pc, []string{"demo"}, false))
	nc.Close()
	require.NoError(t, srv.Shutdown(ctx))

	url := startDev(t, "--data", dir)
	nc, err = nats.Connect(url)
	require.NoError(t, err)
	defer nc.Close()
	js, err = jetstream.New(nc)
	require.NoError(t, err)
	cons, err := js.Consumer(ctx, "LOVIA_RUNS", "agent-demo")
	require.NoError(t, err)
	require.Equal(t, bus.DefaultWorkersAckPending, cons.CachedInfo().Config.MaxAckPending)
}

// A second lovia dev on a taken NATS port or HTTP address says so before
// it starts anything (the embedded server said it only after its
// ten-second ready timeout), naming the flag that picks another.
func TestDevRefusesATakenPort(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nats-port", strconv.Itoa(port), "--http", "127.0.0.1:0"}, fmt.Sprintf("NATS port %d is already in use", port)},
		{[]string{"--nats-port", "0", "--http", l.Addr().String()}, fmt.Sprintf("HTTP address %s is already in use", l.Addr())},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"dev", "--data", t.TempDir(), "--workspace", t.TempDir(), "--log-level", "warn"}, tc.args...)
		code := Main(context.Background(), args, strings.NewReader(""), &out, &errb, getenv(nil))
		require.Equal(t, ExitFailure, code, "%s %s", out.String(), errb.String())
		require.Contains(t, errb.String(), tc.want)
		require.NotContains(t, out.String(), "lovia dev is up")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nats-port", "99999", "--http", "127.0.0.1:0"}, "--nats-port 99999 is not a port: give 1-65535, or 0 for a free one"},
		{[]string{"--nats-port", "0", "--http", "nowhere"}, "cannot listen on HTTP address nowhere: listen tcp: address nowhere: missing port in address: start with --http HOST:PORT"},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"dev", "--data", t.TempDir(), "--workspace", t.TempDir(), "--log-level", "warn"}, tc.args...)
		require.Equal(t, ExitFailure, Main(context.Background(), args, strings.NewReader(""), &out, &errb, getenv(nil)), errb.String())
		require.Contains(t, errb.String(), tc.want)
	}
}

// The commands lovia dev's banner suggests work on the fleet it started:
// with an agents file without demo, they name one of its agents.
func TestDevBannerSuggestsAServedAgent(t *testing.T) {
	t.Parallel()
	agents := filepath.Join(t.TempDir(), "agents.yaml")
	require.NoError(t, os.WriteFile(agents, []byte("agents:\n  - {name: oracle, model: scripted, script: [{text: four}]}\n"), 0o600))
	out, errb := serveDev(t, "--agents", agents)
	re := regexp.MustCompile(`(?s)NATS\s+(nats://\S+).*try:\n  nats req (\S+) '([^']*)'\n  lovia (run .*)\n`)
	var m []string
	require.Eventually(t, func() bool {
		m = re.FindStringSubmatch(out.String())
		return m != nil
	}, 30*time.Second, 20*time.Millisecond, "waiting for lovia dev's banner: %s %s", out.String(), errb.String())
	url, subject, body, run := m[1], m[2], m[3], m[4]
	require.Contains(t, body, `"agent":"oracle"`)

	nc, err := nats.Connect(url)
	require.NoError(t, err)
	defer nc.Close()
	rep, err := nc.Request(subject, []byte(body), 10*time.Second)
	require.NoError(t, err)
	require.Empty(t, rep.Header.Get("Nats-Service-Error"), "the banner's nats req is refused: %s", rep.Data)

	words, err := splitWords(run)
	require.NoError(t, err)
	var runOut, runErr bytes.Buffer
	code := Main(context.Background(), words, strings.NewReader(""), &runOut, &runErr, getenv(map[string]string{"NATS_URL": url}))
	require.Equal(t, ExitOK, code, "the banner's lovia %s: %s", run, runErr.String())
	require.Contains(t, runOut.String(), "four")
}

// splitWords splits a command line of plain and double-quoted words.
func splitWords(s string) ([]string, error) {
	var out []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] == '"' {
			end := strings.IndexByte(s[1:], '"')
			if end < 0 {
				return nil, fmt.Errorf("unclosed quote in %q", s)
			}
			out, s = append(out, s[1:end+1]), s[end+2:]
			continue
		}
		w, rest, _ := strings.Cut(s, " ")
		out, s = append(out, w), rest
	}
	return out, nil
}

// Two lovia devs on one data directory would be two servers writing one
// JetStream store: the second is refused, naming the first and --data.
func TestDevRefusesADataDirInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	startDev(t, "--data", dir)
	out, errb := &syncBuf{}, &syncBuf{}
	args := []string{"dev", "--data", dir, "--nats-port", "0", "--http", "127.0.0.1:0", "--workspace", t.TempDir(), "--log-level", "warn"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() { done <- Main(ctx, args, strings.NewReader(""), out, errb, getenv(nil)) }()
	var code int
	deadline := time.After(time.Minute)
wait:
	for {
		select {
		case code = <-done:
			break wait
		case <-deadline:
			t.Fatalf("the second lovia dev neither ended nor came up in a minute: %s %s", out.String(), errb.String())
		case <-time.After(20 * time.Millisecond): // polling its output for the banner
			if strings.Contains(out.String(), "lovia dev is up") {
				cancel()
				<-done
				t.Fatalf("a second lovia dev came up on the data directory of the first: %s", out.String())
			}
		}
	}
	require.Equal(t, ExitFailure, code, "%s %s", out.String(), errb.String())
	require.Contains(t, errb.String(), fmt.Sprintf("the data directory %s is in use by another lovia dev (pid %d): stop it, or start this one with --data DIR", dir, os.Getpid()))
	require.NotContains(t, out.String(), "lovia dev is up")
}
