package catalog_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/compaction"
	"github.com/lovia-fleet/lovia/pkg/tools"
)

// Load reads an agent's instructions_file next to the agents file, and
// builds its settings, retry policy, tool defaults, compaction policy (here
// through Options.Compaction, as a worker adds its results store) and its
// as_tools.
func ExampleLoad_sections() {
	dir, err := os.MkdirTemp("", "agents")
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer os.RemoveAll(dir)
	_ = os.WriteFile(filepath.Join(dir, "lead.md"), []byte("Ask the helper."), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "agents.yaml"), []byte(`
agents:
  - name: lead
    model: scripted
    instructions_file: lead.md
    settings: {temperature: 0.2, max_tokens: 512}
    retry: {attempts: 2}
    tool_defaults: {timeout: 30s}
    compaction: {compact_at: 80%, compact_to: 40%}
    as_tools: [{agent: helper, max_turns: 3}]
    script:
      - call: {name: ask_helper, args: {input: the facts}}
      - text: done
  - name: helper
    model: scripted
    script: [{text: the facts}]
`), 0o644)
	ts, _ := tools.Builtin(tools.Config{})
	opts := catalog.Options{Tools: ts, Registry: &loop.Registry{},
		Compaction: func(cfg compaction.Config) (loop.ContextPolicy, error) {
			fmt.Println("compaction from", cfg.CompactAt, "to", cfg.CompactTo)
			return compaction.New(cfg), nil
		}}
	c, err := catalog.Load(filepath.Join(dir, "agents.yaml"), opts)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	lead, _ := c.Get("lead")
	fmt.Println(lead.Instructions)
	fmt.Println(*lead.Settings.Temperature, lead.Settings.MaxTokens, lead.Retry.MaxAttempts, lead.DefaultToolTimeout)
	res, err := loop.NewRunner(loop.RunnerConfig{}).Run(context.Background(), lead.Agent, []loop.Entry{loop.UserText("go")})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println(res.Output)
	// Output:
	// compaction from 80% to 40%
	// Ask the helper.
	// 0.2 512 2 30s
	// done
}
