package catalog_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/tools"
)

// An agents file with two agents: a scripted one (a deterministic model,
// for tests and demos) that calls the built-in calculator, and one that
// hands off to it.
const agentsFile = `
agents:
  - name: math
    instructions: Use calculator for arithmetic.
    model: scripted
    tools: [calculator]
    script:
      - call: {name: calculator, args: {expression: "6*7"}, id: c1}
      - text: 6*7 is 42.
  - name: triage
    model: scripted
    handoffs: [math]
    script:
      - call: {name: transfer_to_math, args: {reason: arithmetic}}
`

// Parse builds every agent of an agents file: models resolved, tools picked
// by name from a tool set, handoffs linked. Each agent is ready to run.
func ExampleParse() {
	ts, err := tools.Builtin(tools.Config{})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	// The registry resolves model strings such as openai:gpt-4.1; scripted
	// agents need none of its providers.
	cat, err := catalog.Parse([]byte(agentsFile), catalog.Options{Tools: ts, Registry: &loop.Registry{}})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	for _, a := range cat.Infos() {
		fmt.Printf("%s: model %s, tools %v, handoffs %v\n", a.Name, a.Model, a.Tools, a.Handoffs)
	}

	math, _ := cat.Get("math")
	res, err := loop.NewRunner(loop.RunnerConfig{}).Run(context.Background(), math.Agent, []loop.Entry{loop.UserText("What is 6*7?")})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println(res.Output)
	// Output:
	// math: model scripted, tools [calculator], handoffs []
	// triage: model scripted, tools [], handoffs [math]
	// 6*7 is 42.
}

// Load reads the agents file a worker is started with (lovia worker
// --agents FILE).
func ExampleLoad() {
	dir, err := os.MkdirTemp("", "agents")
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "agents.yaml")
	if err := os.WriteFile(path, []byte(agentsFile), 0o644); err != nil {
		fmt.Println("error:", err)
		return
	}
	ts, _ := tools.Builtin(tools.Config{})
	cat, err := catalog.Load(path, catalog.Options{Tools: ts, Registry: &loop.Registry{}})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println(cat.Names())
	a, _ := cat.Get("math")
	fmt.Println(a.Spec.Model, a.ApprovalTimeout)
	// Output:
	// [math triage]
	// scripted 10m0s
}

// Unknown fields are errors, so a typo does not silently drop a setting.
func ExampleParse_unknownField() {
	ts, _ := tools.Builtin(tools.Config{})
	_, err := catalog.Parse([]byte("agents:\n  - name: math\n    modle: scripted\n"), catalog.Options{Tools: ts})
	fmt.Println(err)
	// Output:
	// unknown keys:
	//   line 3: unknown key "modle" in an agent (known: name, instructions, instructions_file, model, tools, handoffs, approval, output_schema, max_turns, approval_timeout, script, mcp_servers, plugins, http, settings, retry, tool_defaults, compaction, as_tools)
}
