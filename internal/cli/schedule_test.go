package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/registry"
)

// lovia schedule add / ls / pause / resume / rm, with the errors a user
// can cause: bad input is refused before connecting, an unprovisioned
// fleet and a missing schedule say what to do.
func TestScheduleCommands(t *testing.T) {
	t.Parallel()
	srv := startJetStream(t)
	env := getenv(map[string]string{"NATS_URL": srv.ClientURL()})
	ctx := context.Background()
	lovia := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := Main(ctx, args, strings.NewReader(""), &out, &errb, env)
		return out.String(), errb.String(), code
	}

	_, errs, code := lovia("schedule", "add", "standup", "--agent", "support", "--input", "hi", "--cron", "30 9 * * 1-5")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errs, "has 5 fields, want 6")
	require.Contains(t, errs, "starts with seconds")
	_, errs, code = lovia("schedule", "add", "standup", "--agent", "support", "--input", "hi", "--at", "tomorrow")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errs, "RFC 3339")
	// An interval given as a cron points at --every; a long name is
	// told its limit, the same in the message and the hint.
	_, errs, code = lovia("schedule", "add", "tick", "--agent", "support", "--input", "hi", "--cron", "@every 2s")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errs, "--every 2s")
	_, errs, code = lovia("schedule", "add", strings.Repeat("n", 120), "--agent", "support", "--input", "hi", "--every", "2s")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errs, "longer than 100 characters")
	require.NotContains(t, errs, "128")
	_, errs, code = lovia("schedule", "frobnicate")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errs, "use add, ls, get, rm, pause or resume")

	_, errs, code = lovia("schedule", "ls")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errs, "start a lovia worker or gateway once", "an unprovisioned fleet says how to provision it")

	nc, err := nats.Connect(srv.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err = bus.Provision(pctx, js, bus.ProvisionConfig{})
	require.NoError(t, err)

	// An agent nothing serves, served or holds is refused as a submit
	// of it is.
	_, errs, code = lovia("schedule", "add", "standup", "--agent", "dmeo", "--input", "hi", "--every", "1h")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errs, `UnknownAgent: unknown agent "dmeo"`)
	require.Contains(t, errs, "no worker of the fleet serves any agent yet: start a worker (lovia worker --agents FILE) whose agents file defines it")
	_, errs, code = lovia("schedule", "ls")
	require.Equal(t, ExitOK, code, errs)

	// One the agents registry holds is known: its fires wait for a worker.
	reg, err := registry.Ensure(pctx, js, bus.Names{}, 0)
	require.NoError(t, err)
	_, err = reg.Apply(pctx, []catalog.Spec{{Name: "support", Model: "scripted", Script: []catalog.ScriptStep{{Text: "ok"}}}}, false, catalog.Options{Registry: &loop.Registry{}})
	require.NoError(t, err)
	out, errs, code := lovia("schedule", "add", "standup", "--agent", "support", "--input", "Summarise yesterday", "--cron", "0 30 9 * * 1-5", "--tz", "Europe/Paris")
	require.Equal(t, ExitOK, code, errs)
	require.Contains(t, out, "schedule standup added: cron 0 30 9 * * 1-5 (Europe/Paris) runs support")
	require.Contains(t, errs, "no live worker serves agent support yet", "an agent no worker serves is pointed out")
	_, errs, code = lovia("schedule", "add", "standup", "--agent", "support", "--input", "again", "--every", "1h")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errs, "lovia schedule rm standup")
	_, errs, code = lovia("schedule", "add", "tick", "--agent", "support", "--input", "ping", "--every", "15m", "--session", "s1")
	require.Equal(t, ExitOK, code, errs)
	_, errs, code = lovia("schedule", "pause", "tick")
	require.Equal(t, ExitOK, code, errs)

	out, errs, code = lovia("schedule", "ls")
	require.Equal(t, ExitOK, code, errs)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	require.Regexp(t, `^standup\s+support\s+cron 0 30 9 \* \* 1-5 \(Europe/Paris\)\s+active\s+20\d\d-\d\d-\d\dT\d\d:30:00Z \(in [0-9hms]+\)\s+-\s+Summarise yesterday$`, lines[1])
	require.Regexp(t, `^tick\s+support\s+every 15m0s\s+paused\s+-\s+s1\s+ping$`, lines[2])
	out, errs, code = lovia("schedule", "ls", "--json")
	require.Equal(t, ExitOK, code, errs)
	require.Contains(t, out, `"next": "20`, "the active schedule's next fire")
	out, errs, code = lovia("schedule", "get", "standup")
	require.Equal(t, ExitOK, code, errs)
	require.Regexp(t, `next\s+20\d\d-\d\d-\d\dT\d\d:30:00Z \(in `, out)
	require.Contains(t, out, "Summarise yesterday")
	require.Contains(t, out, "lovia runs list --schedule standup")
	out, errs, code = lovia("schedule", "get", "standup", "--json")
	require.Equal(t, ExitOK, code, errs)
	require.Contains(t, out, `"cron": "0 30 9 * * 1-5"`)
	_, errs, code = lovia("schedule", "get", "nope")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errs, `no schedule named "nope"`)

	out, errs, code = lovia("schedule", "resume", "tick")
	require.Equal(t, ExitOK, code, errs)
	require.Contains(t, out, "schedule tick resumed: every 15m0s")
	_, errs, code = lovia("schedule", "rm", "tick")
	require.Equal(t, ExitOK, code, errs)
	_, errs, code = lovia("schedule", "rm", "tick")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errs, `no schedule named "tick"`)
	require.Contains(t, errs, "lovia schedule ls")
}
