package loop_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

type ctxKey struct{}

// userNotes stands for a plugin whose instructions read a store: it needs
// the run's context (its values and deadline) and RunContext (whose data
// to read).
type userNotes struct{ seen []string }

func (*userNotes) Name() string { return "notes" }

func (p *userNotes) Instructions(ctx context.Context, rc *loop.RunContext) string {
	v, _ := ctx.Value(ctxKey{}).(string)
	user, _ := rc.Metadata["user_id"].(string)
	p.seen = append(p.seen, v+"/"+user)
	if user == "" {
		return ""
	}
	return "Notes of " + user + "."
}

// A plugin's instructions are rendered with the run's context and
// RunContext, after the agent's own; an empty one adds nothing.
func TestPluginInstructionsGetTheRunContext(t *testing.T) {
	model := scripted.New([]scripted.Step{scripted.Text("hi")})
	p := &userNotes{}
	agent := &loop.Agent{Name: "a", Provider: model, Instructions: "Be brief.", Plugins: []loop.Plugin{p}}
	ctx := context.WithValue(context.Background(), ctxKey{}, "run-ctx")
	_, err := loop.NewRunner(loop.RunnerConfig{}).Run(ctx, agent, []loop.Entry{loop.UserText("hello")},
		loop.WithMetadata(map[string]any{"user_id": "ada"}))
	require.NoError(t, err)
	require.Equal(t, []string{"run-ctx/ada"}, p.seen)
	head := model.Requests()[0].Entries[0]
	require.Equal(t, loop.KindInput, head.Kind)
	require.Equal(t, "Be brief.\n\nNotes of ada.", head.ContentText())

	model = scripted.New([]scripted.Step{scripted.Text("hi")})
	agent = &loop.Agent{Name: "a", Provider: model, Instructions: "Be brief.", Plugins: []loop.Plugin{&userNotes{}}}
	_, err = loop.NewRunner(loop.RunnerConfig{}).Run(ctx, agent, []loop.Entry{loop.UserText("hello")})
	require.NoError(t, err)
	require.Equal(t, "Be brief.", model.Requests()[0].Entries[0].ContentText())
}
