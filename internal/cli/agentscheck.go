package cli

import (
	"fmt"

	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/provider"
	"github.com/lovia-fleet/lovia/pkg/tools"
)

// checkAgentsFile reads and validates an agents file without a server:
// its YAML, its MCP server declarations, each agent's model, tools,
// handoffs and script. The tools of MCP servers and NATS tool services
// are not resolved (that needs the servers running): a worker checks
// them as it starts. It returns the file's agent names.
func checkAgentsFile(env *Env, path, workspace string) ([]string, error) {
	f, err := catalog.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if _, err := f.Servers(); err != nil {
		return nil, fmt.Errorf("agents file %s: %w", path, err)
	}
	ts, err := tools.Builtin(tools.Config{Workspace: workspace})
	if err != nil {
		return nil, err
	}
	opts := catalog.Options{Tools: ts, Registry: provider.NewRegistry(provider.Config{Getenv: env.Getenv}), MCPUnresolved: true}
	cat, err := catalog.Build(f, opts)
	if err != nil {
		return nil, fmt.Errorf("agents file %s: %w", path, err)
	}
	return cat.Names(), nil
}
