package bus_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

func TestNames(t *testing.T) {
	t.Parallel()
	var n bus.Names // the zero value is the default prefix
	require.Equal(t, "lovia", n.Prefix())
	require.Equal(t, "LOVIA_RUNS", n.RunsStream())
	require.Equal(t, "LOVIA_EVENTS", n.EventsStream())
	require.Equal(t, "workers", n.WorkersConsumer())
	require.Equal(t, []string{"lovia_sessions", "lovia_checkpoints", "lovia_mailbox", "lovia_runs"}, n.Buckets())
	require.Equal(t, "KV_lovia_runs", bus.KVStream(n.RunsBucket()))
	require.Equal(t, "$KV.lovia_runs.r1.rec", bus.KVSubject(n.RunsBucket(), "r1.rec"))
	require.Equal(t, "$KV.lovia_runs.>", bus.KVWildcard(n.RunsBucket()))
	require.Equal(t, "lovia_results", n.ResultsBucket())
	require.Equal(t, "lovia", n.ServiceName())
	require.Equal(t, "lovia.submit.*", n.SubmitWildcard())
	require.Equal(t, "lovia.events.*", n.EventsWildcard())
	require.Equal(t, "lovia.api.submit", n.APISubmit())
	require.Equal(t, "lovia.api.agents", n.Agents())
	require.Equal(t, "lovia.api.>", n.APIWildcard())
	require.Equal(t, "lovia.api.run.*.approve", n.RunAPIWildcard(bus.OpApprove))
	require.Equal(t, "lovia.api.session.*.rewind", n.SessionAPIWildcard(bus.OpRewind))

	acme, err := bus.NewNames("acme")
	require.NoError(t, err)
	s, err := acme.Submit("support")
	require.NoError(t, err)
	require.Equal(t, "acme.submit.support", s)
	agent, err := acme.ParseSubmit(s)
	require.NoError(t, err)
	require.Equal(t, "support", agent)

	s, err = acme.Events("01jz-run_1")
	require.NoError(t, err)
	require.Equal(t, "acme.events.01jz-run_1", s)
	runID, err := acme.ParseEvents(s)
	require.NoError(t, err)
	require.Equal(t, "01jz-run_1", runID)
	require.Equal(t, "ACME_EVENTS", acme.EventsStream())
	require.Equal(t, "acme_sessions", acme.SessionsBucket())
	upper, err := bus.NewNames("ACME")
	require.NoError(t, err)
	require.Equal(t, "acme_results", upper.ResultsBucket(), "buckets are lower case, like the KV buckets")

	for _, op := range bus.RunOps() {
		s, err := acme.RunAPI("r1", op)
		require.NoError(t, err)
		require.Equal(t, "acme.api.run.r1."+string(op), s)
		id, gotOp, err := acme.ParseRunAPI(s)
		require.NoError(t, err)
		require.Equal(t, "r1", id)
		require.Equal(t, op, gotOp)
	}
	for _, op := range bus.SessionOps() {
		s, err := acme.SessionAPI("s1", op)
		require.NoError(t, err)
		require.Equal(t, "acme.api.session.s1."+string(op), s)
		id, gotOp, err := acme.ParseSessionAPI(s)
		require.NoError(t, err)
		require.Equal(t, "s1", id)
		require.Equal(t, op, gotOp)
	}
}

func TestSubjectBuildersReject(t *testing.T) {
	t.Parallel()
	var n bus.Names
	bad := map[string]string{
		"empty":      "",
		"dot":        "a.b",
		"star":       "a*",
		"gt":         ">",
		"space":      "a b",
		"tab":        "a\tb",
		"newline":    "a\n",
		"too long":   strings.Repeat("x", 129),
		"non-ascii":  "héllo",
		"slash":      "a/b",
		"colon":      "openai:gpt",
		"dollar":     "$JS",
		"percent":    "50%",
		"nul":        "a\x00",
		"only stars": "**",
	}
	builders := map[string]func(string) (string, error){
		"Submit": n.Submit,
		"Events": n.Events,
		"RunAPI": func(id string) (string, error) { return n.RunAPI(id, bus.OpStatus) },
		"SessionAPI": func(id string) (string, error) {
			return n.SessionAPI(id, bus.OpSessionGet)
		},
	}
	for bname, build := range builders {
		for name, id := range bad {
			t.Run(bname+"/"+name, func(t *testing.T) {
				t.Parallel()
				s, err := build(id)
				require.Empty(t, s)
				require.ErrorIs(t, err, bus.ErrInvalidToken)
				require.ErrorIs(t, err, bus.ErrInvalidRequest)
				var fe *bus.FieldError
				require.ErrorAs(t, err, &fe)
				require.NotEmpty(t, fe.Field)
			})
		}
	}
	_, err := n.Submit(strings.Repeat("x", 128))
	require.NoError(t, err, "128 characters are fine")

	_, err = bus.NewNames("lo.via")
	require.ErrorIs(t, err, bus.ErrInvalidToken)
	_, err = n.RunAPI("r1", "delete")
	require.ErrorIs(t, err, bus.ErrInvalidRequest)
	_, err = n.SessionAPI("s1", "drop")
	require.ErrorIs(t, err, bus.ErrInvalidRequest)

	for _, s := range []string{"lovia.submit", "lovia.submit.", "lovia.submit.a.b", "other.submit.a", "lovia.events.*"} {
		_, err := n.ParseSubmit(s)
		_, err2 := n.ParseEvents(s)
		require.Error(t, err, s)
		require.Error(t, err2, s)
	}
	for _, s := range []string{"lovia.api.run.r1", "lovia.api.run.r1.nuke", "lovia.api.run..status", "lovia.api.run.a.b.status"} {
		_, _, err := n.ParseRunAPI(s)
		require.Error(t, err, s)
	}
	_, _, err = n.ParseSessionAPI("lovia.api.session.s1.status")
	require.Error(t, err)
}
