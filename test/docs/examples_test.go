package docs_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/provider"
	"github.com/lovia-fleet/lovia/pkg/tools"
	"github.com/lovia-fleet/lovia/pkg/toolsvc"
)

// How the documentation marks its fenced blocks, so that every example is
// run and none escapes: the fence's info string is the language, then one
// of these kinds (GitHub highlights by the first word and shows none of
// the rest):
//
//	```yaml agents                 an agents file: built with a worker's validation
//	```json request SUBJECT        a request body: sent to SUBJECT on a lovia dev fleet, which must accept it
//	```sh commands                 each line run by bash against lovia dev (exit 0 expected)
//	```text illustrative           not run: a shape, a synopsis, output, a server config
//
// A block with no kind, or a kind not listed here, fails the test. In
// commands, `go run ./cmd/cli` is `lovia`, `localhost:8080` is the dev
// gateway, `<run_id>` is the last run id an earlier command printed, and
// `nats` is test/docs/natscli (req and sub, as the nats CLI does them).
// `bin/lovia` is `lovia` too. file=NAME on any block writes its text as
// NAME (a path relative to the commands' directory) for the commands after it.
const (
	kindAgents       = "agents"
	kindRequest      = "request"
	kindCommands     = "commands"
	kindIllustrative = "illustrative"
)

var kinds = []string{kindAgents, kindRequest, kindCommands, kindIllustrative}

// block is one fenced block of a markdown document.
type block struct {
	file  string
	line  int // of the opening fence
	lang  string
	kind  string
	args  []string          // the info string's words after the kind
	attrs map[string]string // its key=value words
	body  string            // dedented by the fence's indentation
}

func (b block) where() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

var fenceRE = regexp.MustCompile("^([ \t]*)(```+|~~~+)[ \t]*(.*)$")

// extractBlocks returns the fenced blocks of a markdown document, with
// an error for each block the test cannot classify (no kind, an unknown
// kind, a fence left open).
func extractBlocks(file, doc string) ([]block, []error) {
	var (
		out    []block
		errs   []error
		open   *block
		indent string
		fence  string
		body   []string
	)
	for i, line := range strings.Split(doc, "\n") {
		m := fenceRE.FindStringSubmatch(line)
		if open != nil {
			if m != nil && strings.HasPrefix(m[2], fence[:1]) && len(m[2]) >= len(fence) && m[3] == "" {
				open.body = strings.Join(body, "\n")
				out = append(out, *open)
				open = nil
				continue
			}
			body = append(body, strings.TrimPrefix(line, indent))
			continue
		}
		if m == nil {
			continue
		}
		b := block{file: file, line: i + 1, attrs: map[string]string{}}
		words := strings.Fields(m[3])
		if len(words) > 0 {
			b.lang = words[0]
		}
		if len(words) > 1 {
			b.kind = words[1]
		}
		for _, w := range words[min(2, len(words)):] {
			if k, v, ok := strings.Cut(w, "="); ok {
				b.attrs[k] = v
			} else {
				b.args = append(b.args, w)
			}
		}
		switch {
		case b.kind == "":
			errs = append(errs, fmt.Errorf("%s: a ``` block without a kind: write its fence as ```<language> <kind>, kind one of %s (test/docs/examples_test.go says what each runs)", b.where(), strings.Join(kinds, ", ")))
		case !slices.Contains(kinds, b.kind):
			errs = append(errs, fmt.Errorf("%s: unknown block kind %q: use one of %s", b.where(), b.kind, strings.Join(kinds, ", ")))
		case b.kind == kindRequest && len(b.args) != 1:
			errs = append(errs, fmt.Errorf("%s: a request block names its subject: ```json request <subject>", b.where()))
		}
		open, indent, fence, body = &b, m[1], m[2], nil
	}
	if open != nil {
		errs = append(errs, fmt.Errorf("%s: the block is never closed", open.where()))
	}
	return out, errs
}

// documented are README.md, deploy/README.md and docs/*.md: the
// documents whose examples must run, whose lovia commands
// TestCommandFlags checks and whose links TestMarkdownLinks checks.
func documented(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	require.NoError(t, err)
	files := []string{"README.md", "deploy/README.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(repoRoot, d)
		require.NoError(t, err)
		files = append(files, filepath.ToSlash(rel))
	}
	return files
}

// TestDocExamples runs every example of README.md, deploy/README.md and
// docs/*.md against one `lovia dev` (the binary): agents files are built
// with a worker's validation, requests are sent, command lines are run, in
// document order.
func TestDocExamples(t *testing.T) {
	t.Parallel()
	dev := startDev(t)
	c := newChecker(t, dev)
	for _, f := range documented(t) {
		data, err := os.ReadFile(filepath.Join(repoRoot, f))
		require.NoError(t, err)
		blocks, errs := extractBlocks(f, string(data))
		ran := 0
		for _, b := range blocks {
			if b.kind != kindIllustrative {
				ran++
			}
		}
		if f == "README.md" {
			require.Positive(t, ran, "README.md has no example the test runs: the extractor is broken")
		}
		errs = append(errs, c.check(t.Context(), t.TempDir(), blocks)...)
		for _, err := range errs {
			t.Error(err)
		}
	}
}

// checker runs the blocks of one document in order.
type checker struct {
	dev  *devFleet
	opts catalog.Options
	path string // PATH for commands: lovia, nats and curl first
}

func newChecker(t *testing.T, dev *devFleet) *checker {
	t.Helper()
	ts, err := tools.Builtin(tools.Config{Workspace: t.TempDir()})
	require.NoError(t, err)
	nc, err := nats.Connect(dev.natsURL, nats.Name("docs test"))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	// As a worker does: tool services the fleet runs are checked, others
	// are left to each run's start.
	services, err := toolsvc.NewRegistry(toolsvc.RegistryConfig{Conn: nc, Prefix: "lovia"})
	require.NoError(t, err)
	require.NoError(t, services.Start(t.Context()))
	t.Cleanup(func() { _ = services.Stop(context.Background()) })
	shims := t.TempDir()
	require.NoError(t, os.Symlink(loviaBin, filepath.Join(shims, "lovia")))
	require.NoError(t, os.Symlink(natsBin, filepath.Join(shims, "nats")))
	curl, err := exec.LookPath("curl")
	require.NoError(t, err, "the docs' examples use curl")
	// curl exits 0 on an HTTP error; the examples must not get one.
	require.NoError(t, os.WriteFile(filepath.Join(shims, "curl"), []byte("#!/bin/sh\nexec "+curl+" --fail-with-body \"$@\"\n"), 0o755))
	return &checker{
		dev:  dev,
		opts: catalog.Options{Tools: ts, Registry: provider.NewRegistry(provider.Config{Getenv: func(string) string { return "" }}), Services: services},
		path: shims + string(os.PathListSeparator) + os.Getenv("PATH"),
	}
}

// check runs blocks in order in the working directory dir and returns
// what failed, each error naming the block.
func (c *checker) check(ctx context.Context, dir string, blocks []block) []error {
	var errs []error
	var runID string
	for _, b := range blocks {
		var err error
		switch b.kind {
		case kindAgents:
			err = c.agents(b.body)
		case kindRequest:
			err = c.request(ctx, b.args[0], b.body)
		case kindCommands:
			err = c.commands(ctx, dir, b.body, &runID)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s example: %w", b.where(), b.kind, err))
		}
		if name := b.attrs["file"]; name != "" && err == nil {
			path := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				errs = append(errs, err)
			}
			if err := os.WriteFile(path, []byte(b.body), 0o644); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// agents builds an agents file as a worker does (built-in tools, the model
// adapters, the fleet's tool services). MCP servers of the docs are not
// started (they name folders and hosts the test does not have): their tool
// names are taken as given, as the gateway takes them.
func (c *checker) agents(body string) error {
	f, err := catalog.Decode([]byte(body))
	if err != nil {
		return err
	}
	opts := c.opts
	servers, err := f.Servers()
	if err != nil {
		return err
	}
	if len(servers) > 0 {
		opts.MCPUnresolved = true
	}
	_, err = catalog.Build(f, opts)
	return err
}

// request sends body to subject on the dev fleet; an error reply fails.
func (c *checker) request(ctx context.Context, subject, body string) error {
	nc, err := nats.Connect(c.dev.natsURL)
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rep, err := nc.RequestWithContext(ctx, subject, []byte(body))
	if err != nil {
		return fmt.Errorf("request on %s: %w", subject, err)
	}
	if e := rep.Header.Get("Nats-Service-Error"); e != "" {
		return fmt.Errorf("request on %s refused: %s", subject, rep.Data)
	}
	return nil
}

var (
	runIDRE     = regexp.MustCompile(`"run_id"\s*:\s*"([^"]+)"`)
	placeholder = regexp.MustCompile(`<run_id>`)
)

// commands runs each line of body (a trailing \ continues it) with bash.
func (c *checker) commands(ctx context.Context, dir, body string, runID *string) error {
	var lines []string
	cur := ""
	for _, l := range strings.Split(body, "\n") {
		if s, ok := strings.CutSuffix(strings.TrimRight(l, " \t"), "\\"); ok {
			cur += s + " "
			continue
		}
		if line := strings.TrimSpace(cur + l); line != "" && !strings.HasPrefix(line, "#") {
			lines = append(lines, line)
		}
		cur = ""
	}
	if len(lines) == 0 {
		return errors.New("a commands block with no command")
	}
	for _, line := range lines {
		run := strings.ReplaceAll(line, "go run ./cmd/cli ", "lovia ")
		run = strings.ReplaceAll(run, "bin/lovia ", "lovia ")
		run = strings.ReplaceAll(run, "localhost:8080", c.dev.httpHost)
		if placeholder.MatchString(run) {
			if *runID == "" {
				return fmt.Errorf("%s: <run_id>, but no earlier command printed a run id", line)
			}
			run = placeholder.ReplaceAllString(run, *runID)
		}
		cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		cmd := exec.CommandContext(cctx, "bash", "-o", "pipefail", "-c", run)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PATH="+c.path, "NATS_URL="+c.dev.natsURL)
		cmd.Stdin = strings.NewReader("")
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %w\n%s", line, err, out)
		}
		if m := runIDRE.FindAllSubmatch(out, -1); len(m) > 0 {
			*runID = string(m[len(m)-1][1])
		} else if strings.HasPrefix(run, "lovia submit") {
			*runID = strings.TrimSpace(string(out))
		}
	}
	return nil
}

// devFleet is a `lovia dev` process (the binary, as a user starts it).
type devFleet struct {
	natsURL, httpHost string
}

func startDev(t *testing.T) *devFleet {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(loviaBin, "dev", "--nats-port", "0", "--http", "127.0.0.1:0",
		"--data", filepath.Join(dir, "data"), "--workspace", filepath.Join(dir, "ws"), "--log-level", "warn")
	var (
		mu  sync.Mutex
		out strings.Builder
	)
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = pw, pw
	require.NoError(t, cmd.Start())
	pw.Close()
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			mu.Lock()
			out.WriteString(sc.Text() + "\n")
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		<-copied
		pr.Close()
		if t.Failed() {
			mu.Lock()
			t.Logf("lovia dev output:\n%s", out.String())
			mu.Unlock()
		}
	})
	natsRE, httpRE := regexp.MustCompile(`NATS\s+(nats://\S+)`), regexp.MustCompile(`HTTP\s+http://(\S+)`)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		mu.Lock()
		printed := out.String()
		mu.Unlock()
		n, h := natsRE.FindStringSubmatch(printed), httpRE.FindStringSubmatch(printed)
		if n != nil && h != nil {
			return &devFleet{natsURL: n[1], httpHost: h[1]}
		}
		require.True(t, time.Now().Before(deadline), "waited 2m for lovia dev to print its NATS and HTTP addresses:\n%s", printed)
		time.Sleep(50 * time.Millisecond) // polling the process's output, with a deadline
	}
}
