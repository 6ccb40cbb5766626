// Package cli implements the lovia command line. Commands write to injected
// writers and return an exit status: 0 on success (a run_completed), 1 on a
// failure (a run_failed or an error), 2 on bad usage.
package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Exit statuses.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
)

// Env is the process environment the CLI sees.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
	// Code, when set, adds a Go program's agents and dependencies to the
	// worker and dev commands (the module's root package sets it).
	Code *Code
}

type command struct {
	summary string
	run     func(ctx context.Context, env *Env, args []string) int
}

func commands() map[string]command {
	return map[string]command{
		"dev":     {"start everything in one process (embedded NATS, gateway, workers, demo agent)", runDev},
		"worker":  {"run a worker that claims and executes runs", runWorker},
		"gateway": {"run the HTTP gateway (and the NATS API)", runGateway},
		"run":     {"submit a run and stream it to the terminal", runRun},
		"submit":  {"submit a run and print its id", runSubmit},
		"tail":    {"print a run's events from the first to the terminal one", runTail},
		"status":  {"print a run's status", runStatus},
		"approve": {"approve (or --reject) a call waiting for a decision", runApprove},
		"cancel":  {"cancel a run", runCancel},
		"inject":  {"send a steering message to a run's next turn", runInject},
		"session": {"the sessions: lovia session ls | show | export | rm | rewind | trim", runSession},
		"tools":   {"list the tools agents can use: built-in, MCP servers (--agents), NATS tool services", runTools},
		"skills":  {"the Skills plugin's object store: push DIR, ls", runSkills},
		"memory":  {"the Memory plugin's bucket: show SCOPE (session:ID or user:ID)", runMemory},
		"agents":  {"the agents: check FILE (offline), and the registry: apply FILE, ls, get, history, rm", runAgents},
		"answer":  {"answer a run's ask_human question: lovia answer RUN_ID CALL_ID TEXT", runAnswer},
		"version": {"print the version, commit, Go and nats-server versions", runVersion},
		"workers": {"list the live workers: the agents each serves, runs in flight, version", runWorkers},
		"runs":    {"list runs (filters, pages) and describe one: lovia runs list, lovia runs describe ID", runRuns},

		// Scheduled runs (schedule.go).
		"schedule": {"scheduled runs: add NAME (--at | --every | --cron), ls, get, rm, pause, resume", runSchedule},
	}
}

// Main runs the command line and returns the exit status.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	return Run(ctx, &Env{Stdin: stdin, Stdout: stdout, Stderr: stderr, Getenv: getenv}, args)
}

// Run runs the command line in env and returns the exit status. With
// env.Code set, no arguments run the worker command.
func Run(ctx context.Context, env *Env, args []string) int {
	cmds := commands()
	codeCommands(env, cmds)
	if len(args) == 0 && env.Code != nil {
		args = []string{"worker"}
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(env.Stderr, env.program(), cmds)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	if args[0] == "--version" {
		args[0] = "version"
	}
	args = commandFirst(args, cmds)
	c, ok := cmds[args[0]]
	if !ok {
		if strings.HasPrefix(args[0], "-") {
			fmt.Fprintf(env.Stderr, "lovia: name a command (flags go before or after it: lovia workers --nats URL)\n\n")
		} else {
			fmt.Fprintf(env.Stderr, "lovia: unknown command %q\n\n", args[0])
		}
		usage(env.Stderr, env.program(), cmds)
		return ExitUsage
	}
	rest, err := clientLogFlags(env, args[0], args[1:])
	if err != nil {
		fmt.Fprintf(env.Stderr, "lovia: %v\n", err)
		return ExitUsage
	}
	code := c.run(ctx, env, rest)
	if code == ExitUsage && askedForHelp(args[1:]) {
		// -h prints the usage the user asked for: not a usage error.
		return ExitOK
	}
	return code
}

// commandFirst moves flags given before the command after it, so that
// `lovia --nats URL workers` is `lovia workers --nats URL`
// (every command parses its flags wherever they are). A flag without
// "=" takes the next argument as its value unless that is a command name
// (`lovia --json workers`); args is returned as it is when no command is
// found.
func commandFirst(args []string, cmds map[string]command) []string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			if _, ok := cmds[a]; !ok {
				return args
			}
			out := make([]string, 0, len(args))
			out = append(out, a)
			out = append(out, args[:i]...)
			return append(out, args[i+1:]...)
		}
		if a == "--" {
			return args
		}
		if !strings.Contains(a, "=") && i+1 < len(args) {
			if _, isCmd := cmds[args[i+1]]; !isCmd {
				i++ // the flag's value
			}
		}
	}
	return args
}

// askedForHelp reports whether args hold -h, -help or --help as a flag
// (before a "--").
func askedForHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help", "--h":
			return true
		}
	}
	return false
}

func usage(w io.Writer, program string, cmds map[string]command) {
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s <command> [flags] [args]\n\ncommands:\n", program)
	for _, n := range names {
		fmt.Fprintf(&b, "  %-9s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintf(&b, "\nRun '%[1]s <command> -h' for a command's flags; they go before or after the command\n(%[1]s --nats URL workers). Most commands print for people; --json prints the API's reply.\n", program)
	fmt.Fprint(w, b.String())
}
