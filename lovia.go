package lovia

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/lovia-fleet/lovia/internal/cli"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Config is what a program serves: its agents, defined in Go, and the
// dependencies their tools, hooks, guardrails and instructions get.
type Config struct {
	// Agents are served by the program's workers. The agents their
	// handoffs lead to are served too. Required.
	Agents []*loop.Agent
	// Deps is every run's RunContext.Deps (a database handle, an HTTP
	// client). It is never persisted: a run resumed on another process
	// gets that process's Deps.
	Deps any
	// MaxTurns caps each run's turns unless its request sets a cap.
	// Default: the fleet's (25).
	MaxTurns int
	// ApprovalTimeout is how long a call waits for an approval decision
	// before it is denied. Default 10m.
	ApprovalTimeout time.Duration
	// Name is the program's name in usage lines. Default: the base name
	// of os.Args[0].
	Name string
}

func (c Config) env() (*cli.Env, error) {
	if len(c.Agents) == 0 {
		return nil, fmt.Errorf("lovia: Config.Agents is empty: give the program at least one *loop.Agent")
	}
	cat, err := catalog.FromAgents(c.Agents, catalog.CodeSettings{MaxTurns: c.MaxTurns, ApprovalTimeout: c.ApprovalTimeout})
	if err != nil {
		return nil, fmt.Errorf("lovia: %w", err)
	}
	name := c.Name
	if name == "" && len(os.Args) > 0 {
		name = filepath.Base(os.Args[0])
	}
	return &cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv,
		Code: &cli.Code{Program: name, Agents: cat, Deps: c.Deps}}, nil
}

// Main runs the program's command line (os.Args) until SIGINT or
// SIGTERM, and exits with its status. See [Run].
func Main(cfg Config) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, cfg, os.Args[1:])
	stop()
	os.Exit(code)
}

// Run runs the command line args (without the program name) and returns
// the exit status: 0 success, 1 failure, 2 bad usage. With no arguments it
// is the worker command. The commands are lovia's: worker and dev serve
// cfg's agents (beside an --agents file or the --registry, if given), and
// the client commands (run, submit, status, approve, …) talk to the fleet.
// Ending ctx stops a worker as SIGTERM does.
func Run(ctx context.Context, cfg Config, args []string) int {
	env, err := cfg.env()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return cli.ExitUsage
	}
	return cli.Run(ctx, env, args)
}
