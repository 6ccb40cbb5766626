package mcp

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// conn is the one client session of one server in this process. Its
// supervisor goroutine (run) connects, lists the tools, waits for the
// session to end or for a list_changed notification, and reconnects with
// backoff; calls share whatever session is current.
type conn struct {
	name   string
	spec   Server
	cfg    *Config
	log    *slog.Logger
	client *sdk.Client
	// changed and suspect wake the supervisor: the server's tool list
	// changed, or a call failed in a way that may mean the session is dead.
	changed chan struct{}
	suspect chan struct{}
	stderr  *tail
	calls   atomic.Int64

	mu       sync.Mutex
	session  *sdk.ClientSession
	up       chan struct{} // closed while session is set
	stopped  bool
	tools    []*loop.Tool
	pid      int
	connects int
	lastErr  error
}

func newConn(name string, spec Server, cfg *Config) *conn {
	c := &conn{
		name: name, spec: spec, cfg: cfg,
		log:     cfg.Logger.With("mcp_server", name),
		changed: make(chan struct{}, 1),
		suspect: make(chan struct{}, 1),
		stderr:  &tail{max: 2048},
		up:      make(chan struct{}),
	}
	c.client = sdk.NewClient(&sdk.Implementation{Name: "lovia", Version: "1"}, &sdk.ClientOptions{
		// No roots, sampling or elicitation: the server keeps the
		// configuration its command line gave it.
		Capabilities: &sdk.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			poke(c.changed)
		},
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			p := req.Params
			c.log.Debug("MCP tool progress", "call_id", p.ProgressToken, "progress", p.Progress, "total", p.Total, "message", p.Message)
		},
	})
	return c
}

func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// run supervises the server until ctx ends. The result of the first
// connect goes to first; when it fails, run returns at once.
func (c *conn) run(ctx context.Context, first chan<- error) {
	backoff := c.cfg.MinBackoff
	for {
		sess, err := c.connect(ctx)
		if first != nil {
			first <- err
			first = nil
			if err != nil {
				return
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.setDown(err)
			c.log.Warn("MCP server connect failed", "error", err, "retry_in", backoff)
		} else {
			began := time.Now()
			c.serve(ctx, sess)
			if ctx.Err() != nil {
				return
			}
			if time.Since(began) > c.cfg.MaxBackoff {
				backoff = c.cfg.MinBackoff
			}
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, c.cfg.MaxBackoff)
	}
}

// serve watches one connected session until it ends or ctx ends, and
// always leaves it closed.
func (c *conn) serve(ctx context.Context, sess *sdk.ClientSession) {
	ended := make(chan error, 1)
	go func() { ended <- sess.Wait() }()
	closeSession := func(why error) {
		c.setDown(why)
		_ = sess.Close()
		<-ended
	}
	for {
		select {
		case <-ctx.Done():
			closeSession(ErrNotStarted)
			return
		case err := <-ended:
			ended <- err // closeSession reads it back
			why := fmt.Errorf("the session ended (%s)", describeEnd(err, c.stderr.String()))
			c.log.Warn("MCP server disconnected; restarting", "reason", why)
			closeSession(why)
			return
		case <-c.changed:
			lctx, cancel := context.WithTimeout(ctx, c.cfg.ConnectTimeout)
			tools, err := c.listTools(lctx, sess)
			cancel()
			if err != nil {
				c.log.Warn("MCP tool list refresh failed", "error", err)
				poke(c.suspect)
				continue
			}
			c.mu.Lock()
			c.tools = tools
			c.mu.Unlock()
			c.log.Info("MCP tool list changed", "tools", len(tools))
		case <-c.suspect:
			pctx, cancel := context.WithTimeout(ctx, c.cfg.ConnectTimeout)
			err := sess.Ping(pctx, nil)
			cancel()
			if err != nil && ctx.Err() == nil {
				why := fmt.Errorf("the session stopped answering (%v)", err)
				c.log.Warn("MCP server unresponsive; reconnecting", "error", err)
				closeSession(why)
				return
			}
		}
	}
}

func describeEnd(err error, stderr string) string {
	s := "the server closed the connection"
	if err != nil && !errors.Is(err, sdk.ErrConnectionClosed) {
		s = err.Error()
	}
	if stderr = strings.TrimSpace(stderr); stderr != "" {
		s += "; its stderr ends: " + lastLine(stderr)
	}
	return s
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// inherited are the variables of the worker's environment a stdio server
// gets (as MCP clients commonly pass): enough to run a command, none of
// the worker's secrets. Anything else goes in the server's env.
var inherited = []string{"HOME", "LANG", "LC_ALL", "LOGNAME", "PATH", "SHELL", "TERM", "TMPDIR", "TZ", "USER"}

func inheritedEnv(getenv func(string) string) []string {
	var out []string
	for _, k := range inherited {
		if v := getenv(k); v != "" {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// connect opens a session and lists the tools.
func (c *conn) connect(ctx context.Context) (*sdk.ClientSession, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ConnectTimeout)
	defer cancel()
	var (
		transport sdk.Transport
		cmd       *exec.Cmd
	)
	if c.spec.Command != "" {
		env, err := expandMap(c.spec.Env, c.cfg.Getenv)
		if err != nil {
			return nil, fmt.Errorf("env %w", err)
		}
		cmd = exec.Command(c.spec.Command, c.spec.Args...)
		cmd.Dir = c.spec.Cwd
		cmd.Env = inheritedEnv(os.Getenv)
		for _, k := range sortedNames(env) {
			cmd.Env = append(cmd.Env, k+"="+env[k])
		}
		c.stderr.Reset()
		cmd.Stderr = c.stderr
		transport = &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	} else {
		url, err := expand(c.spec.URL, c.cfg.Getenv)
		if err != nil {
			return nil, fmt.Errorf("url: %w", err)
		}
		headers, err := expandMap(c.spec.Headers, c.cfg.Getenv)
		if err != nil {
			return nil, fmt.Errorf("headers %w", err)
		}
		transport = httpTransport(url, headers)
	}
	sess, err := c.client.Connect(ctx, transport, nil)
	if err != nil {
		if cmd != nil && cmd.Process != nil {
			// The SDK closes the session on a failed handshake; reap a
			// process it left behind.
			_ = cmd.Process.Kill()
		}
		return nil, c.connectError(err)
	}
	tools, err := c.listTools(ctx, sess)
	if err != nil {
		_ = sess.Close()
		return nil, fmt.Errorf("listing tools: %w", err)
	}
	c.mu.Lock()
	c.session, c.tools = sess, tools
	c.connects++
	if cmd != nil && cmd.Process != nil {
		c.pid = cmd.Process.Pid
	}
	close(c.up)
	c.mu.Unlock()
	c.log.Info("MCP server connected", "tools", len(tools), "pid", c.pid)
	return sess, nil
}

func (c *conn) connectError(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return fmt.Errorf("cannot start %q: %w (install it or fix `command`)", c.spec.Command, ee.Err)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("cannot start %q: %w (install it or fix `command` and `cwd`)", c.spec.Command, pe.Err)
	}
	msg := err.Error()
	if s := strings.TrimSpace(c.stderr.String()); s != "" {
		msg += "; its stderr ends: " + lastLine(s)
	}
	return errors.New(msg)
}

func (c *conn) listTools(ctx context.Context, sess *sdk.ClientSession) ([]*loop.Tool, error) {
	var out []*loop.Tool
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		lt, err := c.tool(t)
		if err != nil {
			c.log.Warn("MCP tool left out", "tool", t.Name, "error", err)
			continue
		}
		out = append(out, lt)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// setDown records that the session is gone; calls wait for the next one.
func (c *conn) setDown(why error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session != nil {
		c.session = nil
		c.up = make(chan struct{})
	}
	c.pid = 0
	if why != nil {
		c.lastErr = why
	}
}

// current returns the session, waiting up to ConnectWait (or ctx) for a
// reconnect.
func (c *conn) current(ctx context.Context) (*sdk.ClientSession, error) {
	c.mu.Lock()
	sess, up, stopped := c.session, c.up, c.stopped
	c.mu.Unlock()
	if sess != nil {
		return sess, nil
	}
	if stopped {
		return nil, ErrNotStarted
	}
	t := time.NewTimer(c.cfg.ConnectWait)
	defer t.Stop()
	select {
	case <-up:
	case <-t.C:
	case <-ctx.Done():
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session != nil {
		return c.session, nil
	}
	if c.lastErr != nil {
		return nil, fmt.Errorf("%w: %w", ErrServerDown, c.lastErr)
	}
	return nil, ErrServerDown
}

// tail keeps the last max bytes written to it (a server's stderr).
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

func (t *tail) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = t.b[:0]
}
