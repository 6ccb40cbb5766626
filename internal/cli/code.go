package cli

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// Code is what a Go program built on lovia (the module's root package)
// adds to the command line: agents defined in Go and the dependencies
// their tools and hooks get (RunContext.Deps). Its worker and dev
// commands serve those agents, beside any --agents file or --registry.
type Code struct {
	// Program is the name usage lines show. Default "lovia".
	Program string
	// Agents are the Go-defined agents (catalog.FromAgents).
	Agents *catalog.Catalog
	// Deps are given to every run (worker.Config.Deps).
	Deps any
}

// codeCommands words the worker and dev commands for a program's code
// agents, and codeFlagHelp their --agents flag.
func codeCommands(env *Env, cmds map[string]command) {
	if env.Code == nil {
		return
	}
	w, d := cmds["worker"], cmds["dev"]
	w.summary = "run a worker serving the program's agents (the command run with no arguments)"
	d.summary = "start everything in one process (embedded NATS, gateway, workers) serving the program's agents"
	cmds["worker"], cmds["dev"] = w, d
}

func codeFlagHelp(env *Env, fs *flag.FlagSet) {
	if env.Code == nil {
		return
	}
	if f := fs.Lookup("agents"); f != nil {
		f.Usage = "agents file (YAML) whose agents are served beside the program's; default: the program's agents alone"
	}
}

// program is the command's name in usage lines.
func (env *Env) program() string {
	if env.Code != nil && env.Code.Program != "" {
		return env.Code.Program
	}
	return "lovia"
}

// codeCatalog is cat with the program's code agents added; a name both
// define is an error naming it. Without an agents file (cat is the
// built-in demo), the code agents alone.
func codeCatalog(env *Env, cat *catalog.Catalog, fromFile bool) (*catalog.Catalog, error) {
	if env.Code == nil || env.Code.Agents == nil {
		return cat, nil
	}
	if !fromFile {
		return env.Code.Agents, nil
	}
	return catalog.Merge(cat, env.Code.Agents)
}

// codeSource is the registry with the program's code agents always in
// it: served, never removed, at every revision. A registry agent of a
// code agent's name is shadowed by the code agent (logged once per name).
type codeSource struct {
	worker.AgentSource
	code *catalog.Catalog
	log  *slog.Logger

	mu     sync.Mutex
	warned map[string]bool
}

func withCode(src worker.AgentSource, code *catalog.Catalog, log *slog.Logger) worker.AgentSource {
	if code == nil {
		return src
	}
	return &codeSource{AgentSource: src, code: code, log: log, warned: map[string]bool{}}
}

func (s *codeSource) overlay(cat *catalog.Catalog) *catalog.Catalog {
	out, shadowed := catalog.Overlay(cat, s.code)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range shadowed {
		if !s.warned[n] {
			s.warned[n] = true
			s.log.Warn("the agents registry defines an agent of a code agent's name; serving the code agent", "agent", n)
		}
	}
	return out
}

func (s *codeSource) Current() (*catalog.Catalog, uint64) {
	cat, rev := s.AgentSource.Current()
	return s.overlay(cat), rev
}

func (s *codeSource) At(ctx context.Context, rev uint64) (*catalog.Catalog, error) {
	cat, err := s.AgentSource.At(ctx, rev)
	if err != nil {
		return nil, err
	}
	return s.overlay(cat), nil
}

func (s *codeSource) Serves(agent string) bool {
	if _, ok := s.code.Get(agent); ok {
		return true
	}
	return s.AgentSource.Serves(agent)
}

func (s *codeSource) Removed(ctx context.Context, agent string) (bool, error) {
	if _, ok := s.code.Get(agent); ok {
		return false, nil
	}
	return s.AgentSource.Removed(ctx, agent)
}

// checkCodeNames refuses an agents file that defines an agent of a code
// agent's name, before anything waits on a server.
func checkCodeNames(env *Env, path string) error {
	if env.Code == nil || env.Code.Agents == nil || path == "" {
		return nil
	}
	f, err := catalog.ReadFile(path)
	if err != nil {
		return err
	}
	var dups []string
	for _, s := range f.Agents {
		if _, ok := env.Code.Agents.Get(s.Name); ok {
			dups = append(dups, fmt.Sprintf("%q", s.Name))
		}
	}
	if len(dups) > 0 {
		return fmt.Errorf("agent %s defined twice: in the program (a code agent) and in the agents file %s; rename one or remove it from the file", strings.Join(dups, ", "), path)
	}
	return nil
}
