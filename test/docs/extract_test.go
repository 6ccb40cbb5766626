package docs_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// brokenDoc holds one broken example of each kind, an unmarked block and a
// block left open: the check must name every one of them.
const brokenDoc = "# Broken\n" +
	"```yaml agents\n" + // line 2: approval names a tool the agent does not have
	"agents:\n" +
	"  - name: support\n" +
	"    model: openai:gpt-4.1-mini\n" +
	"    tools: [time_now, calculator]\n" +
	"    approval: [append_file]\n" +
	"```\n" +
	"```yaml agents\n" + // line 9: script on a model that is not scripted, a handoff to nobody
	"agents:\n" +
	"  - name: support\n" +
	"    model: openai:gpt-4.1-mini\n" +
	"    handoffs: [billing]\n" +
	"    script: [{text: done}]\n" +
	"```\n" +
	"```sh commands\n" + // line 16: an agent the fleet does not serve
	"lovia run --agent nosuch hi\n" +
	"```\n" +
	"```json request lovia.api.submit\n" + // line 19: a request the API refuses
	"{\"agent\": \"demo\"}\n" +
	"```\n" +
	"```sh commands\n" + // line 22: a flag that does not exist
	"lovia schedule add ping --agent demo --input hi --every 15m --sesion ops\n" +
	"```\n" +
	"```yaml\n" + // line 25: no kind
	"agents: []\n" +
	"```\n" +
	"```sh example\n" + // line 28: an unknown kind
	"true\n" +
	"```\n" +
	"```sh commands\n" + // line 31: never closed
	"true\n"

// goodDoc is examples of each kind that work, the later commands using
// what the earlier ones printed and wrote.
const goodDoc = "# Good\n" +
	"```yaml agents file=agents.yaml\n" +
	"agents:\n" +
	"  - name: oracle\n" +
	"    model: scripted\n" +
	"    tools: [echo]\n" +
	"    script:\n" +
	"      - call: {name: echo, args: {text: hi}, id: c1}\n" +
	"      - text: done\n" +
	"```\n" +
	"```json request lovia.api.submit\n" +
	"{\"agent\": \"demo\", \"input\": \"What is 2+2?\"}\n" +
	"```\n" +
	"  ```sh commands\n" + // indented, as in a list item
	"  nats req lovia.api.submit '{\"agent\":\"demo\",\"input\":\"What is 12*7?\"}'   # -> {\"run_id\": ...}\n" +
	"  nats sub \"lovia.events.<run_id>\" --all\n" +
	"  curl -s localhost:8080/v1/runs -H 'Content-Type: application/json' \\\n" +
	"       -d '{\"agent\":\"demo\",\"input\":\"What is 2+2?\"}'\n" +
	"  lovia tail <run_id>\n" +
	"  lovia agents apply agents.yaml\n" +
	"  ```\n" +
	"```text illustrative\n" +
	"{run_id, seq, type}\n" +
	"```\n"

// TestExamplesCheckFailsOnBrokenOnes checks the examples' check itself:
// every broken example, unmarked block and open fence of brokenDoc is
// reported with its line, and goodDoc passes.
func TestExamplesCheckFailsOnBrokenOnes(t *testing.T) {
	t.Parallel()
	dev := startDev(t)
	c := newChecker(t, dev)

	blocks, errs := extractBlocks("broken.md", brokenDoc)
	errs = append(errs, c.check(t.Context(), t.TempDir(), blocks)...)
	var got []string
	for _, err := range errs {
		got = append(got, err.Error())
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{
		`broken.md:2: agents example: agent "support": approval names "append_file", which is not among the agent's tools`,
		`broken.md:9: agents example: agent "support": script is only for model scripted`,
		`broken.md:16: commands example: lovia run --agent nosuch hi: exit status`,
		`broken.md:19: request example: request on lovia.api.submit refused`,
		`broken.md:22: commands example: lovia schedule add ping`,
		`broken.md:25: a ` + "```" + ` block without a kind`,
		`broken.md:28: unknown block kind "example"`,
		`broken.md:31: the block is never closed`,
	} {
		require.Contains(t, all, want)
	}
	require.Len(t, got, 8, all)

	blocks, errs = extractBlocks("good.md", goodDoc)
	require.Empty(t, errs)
	require.Len(t, blocks, 4)
	require.Equal(t, "agents.yaml", blocks[0].attrs["file"])
	require.Equal(t, []string{"lovia.api.submit"}, blocks[1].args)
	require.True(t, strings.HasPrefix(blocks[2].body, "nats req"), "an indented block is dedented: %q", blocks[2].body)
	require.Empty(t, c.check(t.Context(), t.TempDir(), blocks))
}
