package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

type depsNote struct{ text string }

// codeEnv is the Env of a Go program with one code agent, "noter", whose
// Go tool answers with its Deps.
func codeEnv(t *testing.T, out, errb *syncBuf) *Env {
	t.Helper()
	note := loop.NewTool("note", "the program's note", func(_ context.Context, rc *loop.RunContext, _ struct{}) (string, error) {
		return rc.Deps.(*depsNote).text, nil
	})
	a := &loop.Agent{Name: "noter", Tools: []*loop.Tool{note},
		Provider: scripted.New([]scripted.Step{scripted.CallTool("note", struct{}{}, "c1"), scripted.Text("noted")}, scripted.ForAgent("noter"))}
	cat, err := catalog.FromAgents([]*loop.Agent{a}, catalog.CodeSettings{})
	require.NoError(t, err)
	return &Env{Stdin: strings.NewReader(""), Stdout: out, Stderr: errb, Getenv: getenv(nil),
		Code: &Code{Program: "orders", Agents: cat, Deps: &depsNote{text: "from deps"}}}
}

// TestCodeAgentsInDev: the program's dev command serves its code agents
// (and not the demo agent), its tools get the program's Deps, and the
// program's own run command submits to them.
func TestCodeAgentsInDev(t *testing.T) {
	out, errb := &syncBuf{}, &syncBuf{}
	env := codeEnv(t, out, errb)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, env, []string{"dev", "--nats-port", "0", "--http", "127.0.0.1:0", "--data", t.TempDir(), "--workspace", t.TempDir(), "--log-level", "warn"})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			require.Equal(t, ExitOK, code, errb.String())
		case <-time.After(30 * time.Second):
			t.Error("dev did not stop")
		}
	})
	re := regexp.MustCompile(`NATS\s+(nats://\S+)`)
	var url string
	require.Eventually(t, func() bool {
		m := re.FindStringSubmatch(out.String())
		if m != nil {
			url = m[1]
		}
		return m != nil
	}, 30*time.Second, 20*time.Millisecond, "dev output: %s %s", out.String(), errb.String())
	require.Contains(t, out.String(), "agents: noter\n", "dev serves the code agents alone")

	rout, rerr := &syncBuf{}, &syncBuf{}
	renv := codeEnv(t, rout, rerr)
	renv.Getenv = getenv(map[string]string{"NATS_URL": url})
	require.Equal(t, ExitOK, Run(context.Background(), renv, []string{"run", "--agent", "noter", "note?"}), rerr.String())
	require.Contains(t, rout.String(), "← note: from deps")
	require.Contains(t, rout.String(), "noted")
}

// TestCodeAgentDefinedInTheFileToo: a worker of the program given an
// agents file that defines a code agent's name stops at start-up, naming
// it, before it waits on NATS.
func TestCodeAgentDefinedInTheFileToo(t *testing.T) {
	file := filepath.Join(t.TempDir(), "agents.yaml")
	require.NoError(t, os.WriteFile(file, []byte("agents:\n  - {name: noter, model: scripted, script: [{text: hi}]}\n"), 0o644))
	out, errb := &syncBuf{}, &syncBuf{}
	env := codeEnv(t, out, errb)
	start := time.Now()
	code := Run(context.Background(), env, []string{"worker", "--nats", "nats://127.0.0.1:1", "--agents", file})
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errb.String(), `agent "noter" defined twice: in the program (a code agent) and in the agents file`)
	require.Less(t, time.Since(start), 10*time.Second, "refused before waiting on NATS")
}

// TestCodeUsageNamesTheProgram: the program's -h names it, not lovia.
func TestCodeUsageNamesTheProgram(t *testing.T) {
	out, errb := &syncBuf{}, &syncBuf{}
	env := codeEnv(t, out, errb)
	require.Equal(t, ExitOK, Run(context.Background(), env, []string{"-h"}))
	require.Contains(t, errb.String(), "usage: orders <command>")
	require.Contains(t, errb.String(), "worker    run a worker serving the program's agents")
	var b bytes.Buffer
	env.Stderr = &b
	require.Equal(t, ExitOK, Run(context.Background(), env, []string{"worker", "-h"}))
	require.Contains(t, b.String(), "usage: orders worker ")
}

// fixedSource is a registry source of one fixed catalog.
type fixedSource struct{ cat *catalog.Catalog }

func (s fixedSource) Current() (*catalog.Catalog, uint64) { return s.cat, 7 }
func (s fixedSource) At(context.Context, uint64) (*catalog.Catalog, error) {
	return s.cat, nil
}
func (s fixedSource) Changes() <-chan struct{}                      { return nil }
func (s fixedSource) Serves(agent string) bool                      { _, ok := s.cat.Get(agent); return ok }
func (s fixedSource) Removed(context.Context, string) (bool, error) { return true, nil }

// TestCodeAgentsBesideTheRegistry: with --registry the code agents are in
// every revision, served and never removed; a registry agent of a code
// agent's name is shadowed by the code agent, with a warning.
func TestCodeAgentsBesideTheRegistry(t *testing.T) {
	out, errb := &syncBuf{}, &syncBuf{}
	env := codeEnv(t, out, errb)
	reg, err := catalog.Parse([]byte("agents:\n  - {name: noter, model: scripted, script: [{text: hi}]}\n  - {name: other, model: scripted, script: [{text: hi}]}\n"), catalog.Options{})
	require.NoError(t, err)
	var logs bytes.Buffer
	log, err := logger(&Env{Stderr: &logs, Getenv: getenv(nil)}, "info")
	require.NoError(t, err)
	src := withCode(fixedSource{reg}, env.Code.Agents, log)
	cat, rev := src.Current()
	require.Equal(t, uint64(7), rev)
	require.Equal(t, []string{"noter", "other"}, cat.Names())
	a, _ := cat.Get("noter")
	require.True(t, a.Code, "the code agent wins")
	at, err := src.At(context.Background(), 3)
	require.NoError(t, err)
	a, _ = at.Get("noter")
	require.True(t, a.Code)
	require.True(t, src.Serves("noter"))
	removed, err := src.Removed(context.Background(), "noter")
	require.NoError(t, err)
	require.False(t, removed)
	require.Equal(t, 1, strings.Count(logs.String(), "serving the code agent"), logs.String())
}
