package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/toolsvc"
)

const twoRunsAgents = `
agents:
  - name: gp
    model: scripted
    tools: [gosvc__append]
    script:
      - call: {name: gosvc__append, args: {line: from-gp}, id: c1}
      - text: done
  - name: gq
    model: scripted
    tools: [gosvc__append]
    script:
      - call: {name: gosvc__append, args: {line: from-gq}, id: c1}
      - text: done
`

// TestDedupedToolServiceKeepsRunsApart: two agents whose scripted models
// both name their call c1 call a deduplicated tool service from a `lovia
// worker` process, one run after the other. Each run's call runs the tool
// and gets its own reply: a call id is unique only within its run, and
// the service keys its replies by run and call id.
func TestDedupedToolServiceKeepsRunsApart(t *testing.T) {
	srv, nc, _ := startNATS(t)
	ctx := context.Background()
	var mu sync.Mutex
	var lines []string
	appendLine := loop.NewTool("append", "Append a line.", func(_ context.Context, _ *loop.RunContext, in struct {
		Line string `json:"line"`
	}) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, in.Line)
		return "appended " + in.Line, nil
	})
	svc, err := toolsvc.New(toolsvc.Config{Conn: nc, Name: "gosvc", Tools: []*loop.Tool{appendLine}, Dedupe: &toolsvc.Dedupe{}})
	require.NoError(t, err)
	require.NoError(t, svc.Start(ctx))
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })

	startWorker(t, srv.ClientURL(), writeAgents(t, twoRunsAgents), t.TempDir(), "w1")
	c, err := client.New(nc, client.Options{})
	require.NoError(t, err)
	waitServed(t, c, "gp", "gq")
	for _, agent := range []string{"gp", "gq"} {
		tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		rep, err := c.Submit(tctx, &bus.RunRequest{Agent: agent, Input: bus.TextInput("go")})
		require.NoError(t, err)
		tail, err := c.Tail(tctx, rep.RunID, bus.FromStart())
		require.NoError(t, err)
		var envs []*bus.Envelope
		for env, err := range tail.All(tctx) {
			require.NoError(t, err, "tailing %s's run", agent)
			envs = append(envs, env)
		}
		_ = tail.Close(ctx)
		cancel()
		require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type, "%s: %v", agent, fleettest.Types(envs))
		done := fleettest.OfType(envs, loop.EventToolCallCompleted)
		require.Len(t, done, 1, agent)
		res := fleettest.Event[*loop.ToolCallCompleted](t, done[0])
		require.Equal(t, "appended from-"+agent, res.Output, "%s's call got another run's reply", agent)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"from-gp", "from-gq"}, lines, "the tool ran once for each run")
}
