package loop_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

// countingPlugin counts its setups.
type countingPlugin struct {
	name   string
	setups *int
}

func (p *countingPlugin) Name() string { return p.name }
func (p *countingPlugin) Setup(context.Context, *loop.RunContext) error {
	*p.setups++
	return nil
}

// §8.5 Handoffs and delegation.
var handoffScenarios = []scenario{
	{"S34_first_handoff_wins", func(t *testing.T) {
		var recorder []string
		rec := func(name string) func(context.Context, *loop.RunContext, string) error {
			return func(context.Context, *loop.RunContext, string) error { recorder = append(recorder, name); return nil }
		}
		alpha := &loop.Agent{Name: "alpha", Provider: scripted.New([]scripted.Step{scripted.Text("alpha here")}, scripted.Sequential())}
		beta := &loop.Agent{Name: "beta", Provider: scripted.New([]scripted.Step{scripted.Text("beta here")}, scripted.Sequential())}
		plain := strTool("plain", func(context.Context) (string, error) { return "plain ran", nil })
		p := scripted.New([]scripted.Step{scripted.Batch(
			scripted.Call{ID: "h1", Name: "transfer_to_alpha"},
			scripted.Call{ID: "h2", Name: "transfer_to_beta"},
			scripted.Call{ID: "c3", Name: "plain"})})
		triage := &loop.Agent{Name: "triage", Provider: p, Tools: []*loop.Tool{plain},
			Handoffs: []loop.Handoff{{Agent: alpha, OnHandoff: rec("alpha")}, {Agent: beta, OnHandoff: rec("beta")}}}
		evs, res, err := stream(t, triage, "help")
		require.NoError(t, err)
		require.Equal(t, "alpha", res.FinalAgent)
		require.Equal(t, "alpha here", res.Output)
		require.Equal(t, []string{"alpha"}, recorder)
		outs := map[string]string{}
		for _, e := range find[*loop.ToolCallCompleted](evs) {
			outs[e.Call.ID] = e.Output
		}
		require.Equal(t, "Transferred to alpha", outs["h1"])
		require.Contains(t, outs["h2"], "already transferred to 'alpha'")
		require.Contains(t, outs["h2"], "Handoff not performed")
		require.Equal(t, "plain ran", outs["c3"])
		require.Contains(t, sig(evs), "HO(triage→alpha)")
		// HandoffOccurred follows TurnEnded of the turn that handed off.
		s := sig(evs)
		require.Equal(t, indexOf(s, "TE(1)")+1, indexOf(s, "HO(triage→alpha)"))
	}},
	{"S35_handoff_is_barrier", func(t *testing.T) {
		slow := strTool("slow", func(ctx context.Context) (string, error) {
			select {
			case <-time.After(30 * time.Millisecond):
			case <-ctx.Done():
			}
			return "slow ok", nil
		})
		alpha := &loop.Agent{Name: "alpha", Provider: scripted.New([]scripted.Step{scripted.Text("done")}, scripted.Sequential())}
		p := scripted.New([]scripted.Step{scripted.Batch(scripted.Call{ID: "c1", Name: "slow"}, scripted.Call{ID: "h1", Name: "transfer_to_alpha"})})
		triage := &loop.Agent{Name: "triage", Provider: p, Tools: []*loop.Tool{slow}, Handoffs: []loop.Handoff{loop.HandoffTo(alpha)}}
		evs, res, err := stream(t, triage, "go")
		require.NoError(t, err)
		var order []string
		for _, e := range find[*loop.ToolCallCompleted](evs) {
			order = append(order, e.Call.ID)
			require.False(t, e.IsError)
		}
		require.Equal(t, []string{"c1", "h1"}, order)
		require.Equal(t, "alpha", res.FinalAgent)
	}},
	{"S37_systemless_boundaries", func(t *testing.T) {
		seed := func(t *testing.T) *loop.MemorySession {
			s := loop.NewMemorySession()
			_, err := s.Append(context.Background(), "u1", loop.Segment{RunID: "r1", Entries: []loop.Entry{loop.UserText("first"), loop.AssistantText("r1")}})
			require.NoError(t, err)
			return s
		}
		build := func(triageIns, specIns string) *loop.Agent {
			spec := &loop.Agent{Name: "specialist", Instructions: specIns, Provider: scripted.New([]scripted.Step{scripted.Text("final")}, scripted.Sequential())}
			return &loop.Agent{Name: "triage", Instructions: triageIns, Handoffs: []loop.Handoff{loop.HandoffTo(spec)},
				Provider: scripted.New([]scripted.Step{scripted.CallTool("transfer_to_specialist", nil, "h1")}, scripted.Sequential())}
		}
		for _, tc := range []struct{ name, triage, spec string }{{"a_system_to_none", "You triage.", ""}, {"b_none_to_system", "", "You specialize."}} {
			t.Run(tc.name, func(t *testing.T) {
				s := seed(t)
				_, err := newRunner().Run(context.Background(), build(tc.triage, tc.spec), []loop.Entry{loop.UserText("second")},
					loop.WithSession(s, "u1"), loop.WithCheckpoint(loop.NewMemoryCheckpointer(), "r2"))
				require.NoError(t, err)
				segs, err := s.Segments(context.Background(), "u1")
				require.NoError(t, err)
				require.Len(t, segs, 2)
				flat, err := loop.LoadSession(context.Background(), s, "u1")
				require.NoError(t, err)
				var texts []string
				for _, e := range flat {
					switch e.Kind {
					case loop.KindInput:
						texts = append(texts, e.Content)
					case loop.KindAssistantText:
						texts = append(texts, e.Text)
					}
				}
				require.Equal(t, []string{"first", "r1", "second", "final"}, texts)
			})
		}
		t.Run("c_caller_system_input_is_body", func(t *testing.T) {
			specP := scripted.New([]scripted.Step{scripted.Text("final")}, scripted.Sequential())
			spec := &loop.Agent{Name: "specialist", Instructions: "target-head", Provider: specP}
			triage := &loop.Agent{Name: "triage", Handoffs: []loop.Handoff{loop.HandoffTo(spec)},
				Provider: scripted.New([]scripted.Step{scripted.CallTool("transfer_to_specialist", nil, "h1")}, scripted.Sequential())}
			s := loop.NewMemorySession()
			_, err := newRunner().Run(context.Background(), triage, []loop.Entry{loop.SystemText("SYS-INPUT"), loop.UserText("hello")}, loop.WithSession(s, "u2"))
			require.NoError(t, err)
			segs, _ := s.Segments(context.Background(), "u2")
			require.Len(t, segs, 1)
			require.Equal(t, "In(system,SYS-INPUT)", entrySig(segs[0].Entries[0]))
			require.Equal(t, "In(user,hello)", entrySig(segs[0].Entries[1]))
			req := specP.Requests()[0].Entries
			require.Equal(t, []string{"In(system,target-head)", "In(system,SYS-INPUT)", "In(user,hello)"}, entrySigs(req[:3]))
		})
	}},
	{"S38_activation_memo", func(t *testing.T) {
		var setupsA, setupsB int
		a := &loop.Agent{Name: "a", Plugins: []loop.Plugin{&countingPlugin{"count", &setupsA}}}
		b := &loop.Agent{Name: "b", Plugins: []loop.Plugin{&countingPlugin{"count", &setupsB}}}
		a.Handoffs = []loop.Handoff{loop.HandoffTo(b)}
		b.Handoffs = []loop.Handoff{loop.HandoffTo(a)}
		a.Provider = scripted.New([]scripted.Step{scripted.CallTool("transfer_to_b", nil, "h1"), scripted.Text("done")}, scripted.Sequential())
		b.Provider = scripted.New([]scripted.Step{scripted.CallTool("transfer_to_a", nil, "h2")}, scripted.Sequential())
		res, err := newRunner().Run(context.Background(), a, []loop.Entry{loop.UserText("go")})
		require.NoError(t, err)
		require.Equal(t, "done", res.Output)
		require.Equal(t, 1, setupsA)
		require.Equal(t, 1, setupsB)
	}},
}
