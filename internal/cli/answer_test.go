package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

const askerAgents = `
agents:
  - name: asker
    model: scripted
    tools: [ask_human]
    approval_timeout: 2s
    script:
      - call: {name: ask_human, args: {question: "Which colour?"}, id: q1}
      - text: thanks
`

// ask_human (standard tools): the model asks a person; the run waits for
// the answer given from any client — lovia answer, or lovia run on a
// terminal — and the answer is the tool's result; no answer within the
// approval timeout fails closed (the model is told, nothing is invented).
func TestAskHuman(t *testing.T) {
	url := startDev(t, "--agents", writeFile(t, askerAgents))
	env := getenv(map[string]string{"NATS_URL": url})
	ctx := context.Background()
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	defer nc.Close()
	c, err := client.New(nc, client.Options{})
	require.NoError(t, err)

	toolOutput := func(runID string, answer func()) string {
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		tail, err := c.Tail(tctx, runID, bus.FromStart())
		require.NoError(t, err)
		defer func() { _ = tail.Close(ctx) }()
		out := ""
		for env, err := range tail.All(tctx) {
			require.NoError(t, err)
			ev, err := env.Event()
			require.NoError(t, err)
			switch e := ev.(type) {
			case *loop.ApprovalRequired:
				require.Contains(t, e.Call.Arguments, "Which colour?")
				if answer != nil {
					answer()
				}
			case *loop.ToolCallCompleted:
				out = e.Output
			}
		}
		return out
	}

	rep, err := c.Submit(ctx, &bus.RunRequest{Agent: "asker", Input: bus.TextInput("paint")})
	require.NoError(t, err)
	got := toolOutput(rep.RunID, func() {
		var out, errb bytes.Buffer
		code := Main(ctx, []string{"answer", rep.RunID, "q1", "blue,", "please"}, strings.NewReader(""), &out, &errb, env)
		require.Equal(t, ExitOK, code, errb.String())
	})
	require.Equal(t, "blue, please", got, "the answer is the tool's result")

	rep, err = c.Submit(ctx, &bus.RunRequest{Agent: "asker", Input: bus.TextInput("paint")})
	require.NoError(t, err)
	got = toolOutput(rep.RunID, nil)
	require.Contains(t, got, "not approved", "no answer in time fails closed")

	var out, errb bytes.Buffer
	code := Main(ctx, []string{"run", "--agent", "asker", "paint"}, strings.NewReader("green\n"), &out, &errb, env)
	require.Equal(t, ExitOK, code, errb.String())
	require.Contains(t, errb.String(), "? Which colour?")
	require.Contains(t, out.String()+errb.String(), "green")
}
