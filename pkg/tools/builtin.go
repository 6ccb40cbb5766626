package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Config configures the built-in tools.
type Config struct {
	// Workspace is the directory read_file and append_file are confined to
	// (default: the current directory's "workspace" subdirectory).
	Workspace string
	// Now is the clock of time_now (default time.Now).
	Now func() time.Time
	// MaxReadBytes caps read_file (default 1 MiB).
	MaxReadBytes int64
}

// Set is a named set of tools.
type Set map[string]*loop.Tool

// Names returns the tool names, sorted.
func (s Set) Names() []string {
	out := make([]string, 0, len(s))
	for n := range s {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Select returns the named tools in order; unknown names are an error that
// lists the known ones.
func (s Set) Select(names ...string) ([]*loop.Tool, error) {
	out := make([]*loop.Tool, 0, len(names))
	for _, n := range names {
		t := s[n]
		if t == nil {
			return nil, fmt.Errorf("unknown tool %q (known: %s)", n, strings.Join(s.Names(), ", "))
		}
		out = append(out, t)
	}
	return out, nil
}

type echoIn struct {
	Text string `json:"text" desc:"Text to echo back."`
}

type sleepIn struct {
	Ms int `json:"ms" desc:"Milliseconds to sleep." jsonschema:"minimum=0,maximum=3600000"`
}

type calcIn struct {
	Expression string `json:"expression" desc:"Arithmetic expression, e.g. (12*7)+3^2." jsonschema:"minLength=1,maxLength=1000"`
}

type readIn struct {
	Path string `json:"path" desc:"File path relative to the workspace."`
}

type appendIn struct {
	Path string `json:"path" desc:"File path relative to the workspace."`
	Line string `json:"line" desc:"Line to append (a newline is added)."`
}

type noArgs struct{}

// Builtin returns the built-in tools.
func Builtin(cfg Config) (Set, error) {
	if cfg.Workspace == "" {
		cfg.Workspace = "workspace"
	}
	abs, err := filepath.Abs(cfg.Workspace)
	if err != nil {
		return nil, fmt.Errorf("tools: workspace %q: %w", cfg.Workspace, err)
	}
	cfg.Workspace = abs
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxReadBytes == 0 {
		cfg.MaxReadBytes = 1 << 20
	}
	ws := &workspace{root: abs}
	s := Set{}
	s["echo"] = loop.NewTool("echo", "Echo the given text back.", func(_ context.Context, _ *loop.RunContext, in echoIn) (string, error) {
		return in.Text, nil
	})
	s["sleep"] = loop.NewTool("sleep", "Sleep for the given number of milliseconds, then report it.", func(ctx context.Context, _ *loop.RunContext, in sleepIn) (string, error) {
		t := time.NewTimer(time.Duration(in.Ms) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
			return fmt.Sprintf("slept %d ms", in.Ms), nil
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
	})
	s["ask_human"] = AskHuman()
	s["time_now"] = loop.NewTool("time_now", "The current date and time (UTC, RFC 3339).", func(context.Context, *loop.RunContext, noArgs) (string, error) {
		return cfg.Now().UTC().Format(time.RFC3339), nil
	})
	s["calculator"] = loop.NewTool("calculator", "Evaluate an arithmetic expression (+ - * / % ^ and parentheses).", func(_ context.Context, _ *loop.RunContext, in calcIn) (string, error) {
		v, err := Eval(in.Expression)
		if err != nil {
			return "", &loop.ToolError{Tool: "calculator", Message: "cannot evaluate " + fmt.Sprintf("%q", in.Expression) + ": " + err.Error(), Hint: "use numbers, + - * / % ^ and parentheses"}
		}
		return FormatNumber(v), nil
	})
	s["read_file"] = loop.NewTool("read_file", "Read a text file from the workspace.", func(_ context.Context, _ *loop.RunContext, in readIn) (string, error) {
		p, err := ws.resolve(in.Path)
		if err != nil {
			return "", err
		}
		f, err := os.Open(p)
		if err != nil {
			return "", &loop.ToolError{Tool: "read_file", Message: fmt.Sprintf("cannot read %q: %v", in.Path, errors.Unwrap(err)), Hint: "paths are relative to the workspace"}
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, cfg.MaxReadBytes+1))
		if err != nil {
			return "", err
		}
		if int64(len(b)) > cfg.MaxReadBytes {
			return "", &loop.ToolError{Tool: "read_file", Message: fmt.Sprintf("%q is larger than %d bytes", in.Path, cfg.MaxReadBytes)}
		}
		return string(b), nil
	})
	s["append_file"] = loop.NewTool("append_file", "Append one line to a text file in the workspace (created if missing).", func(_ context.Context, _ *loop.RunContext, in appendIn) (string, error) {
		p, err := ws.resolve(in.Path)
		if err != nil {
			return "", err
		}
		if strings.ContainsAny(in.Line, "\n\r") {
			return "", &loop.ToolError{Tool: "append_file", Message: "line must not contain newlines", Hint: "call append_file once per line"}
		}
		ws.mu.Lock()
		defer ws.mu.Unlock()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return "", err
		}
		if _, err := f.WriteString(in.Line + "\n"); err != nil {
			f.Close()
			return "", err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return "", err
		}
		if err := f.Close(); err != nil {
			return "", err
		}
		return fmt.Sprintf("appended 1 line to %s", in.Path), nil
	}, loop.Sequential())
	return s, nil
}

type workspace struct {
	root string
	mu   sync.Mutex
}

// resolve maps a workspace-relative path to an absolute one inside root,
// refusing absolute paths, escapes and symlinks that leave the workspace.
func (w *workspace) resolve(rel string) (string, error) {
	if rel == "" {
		return "", &loop.ToolError{Message: "path is empty"}
	}
	if filepath.IsAbs(rel) {
		return "", &loop.ToolError{Message: fmt.Sprintf("path %q is absolute", rel), Hint: "use a path relative to the workspace"}
	}
	p := filepath.Join(w.root, rel)
	if p != w.root && !strings.HasPrefix(p, w.root+string(filepath.Separator)) {
		return "", &loop.ToolError{Message: fmt.Sprintf("path %q leaves the workspace", rel), Hint: "use a path inside the workspace"}
	}
	// Resolve symlinks of the existing part of the path.
	dir := filepath.Dir(p)
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		rootReal, rerr := filepath.EvalSymlinks(w.root)
		if rerr == nil && real != rootReal && !strings.HasPrefix(real, rootReal+string(filepath.Separator)) {
			return "", &loop.ToolError{Message: fmt.Sprintf("path %q leaves the workspace through a symlink", rel)}
		}
	}
	if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return "", &loop.ToolError{Message: fmt.Sprintf("path %q is a symlink", rel)}
	}
	return p, nil
}
