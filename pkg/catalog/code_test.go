package catalog_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

// TestFromAgentsCollectsHandoffs: the code agents a handoff leads to are
// in the catalog (a cycle and an agent given twice are fine), with a Spec
// for listings and the fleet settings given.
func TestFromAgentsCollectsHandoffs(t *testing.T) {
	p := scripted.New([]scripted.Step{scripted.Text("ok")})
	c := &loop.Agent{Name: "c", Provider: p}
	b := &loop.Agent{Name: "b", Provider: p, Handoffs: []loop.Handoff{loop.HandoffTo(c)}}
	a := &loop.Agent{Name: "a", Instructions: "route", Model: "demo", Provider: p, Handoffs: []loop.Handoff{loop.HandoffTo(b)}}
	c.Handoffs = []loop.Handoff{loop.HandoffTo(a)}
	cat, err := catalog.FromAgents([]*loop.Agent{a, a}, catalog.CodeSettings{MaxTurns: 5, ApprovalTimeout: time.Minute})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c"}, cat.Names())
	got, _ := cat.Get("a")
	require.True(t, got.Code)
	require.Equal(t, 5, got.MaxTurns)
	require.Equal(t, time.Minute, got.ApprovalTimeout)
	require.Equal(t, catalog.Spec{Name: "a", Instructions: "route", Model: "demo", Handoffs: []string{"b"}}, got.Spec)

	_, err = catalog.FromAgents([]*loop.Agent{{Name: "bad name", Provider: p}}, catalog.CodeSettings{})
	require.ErrorContains(t, err, `code agent "bad name": name must be`)
	_, err = catalog.FromAgents([]*loop.Agent{a}, catalog.CodeSettings{MaxTurns: -1})
	require.ErrorContains(t, err, "MaxTurns -1 is negative")
}

// TestOverlay: code agents shadow agents of the same name.
func TestOverlay(t *testing.T) {
	p := scripted.New([]scripted.Step{scripted.Text("ok")})
	code, err := catalog.FromAgents([]*loop.Agent{{Name: "x", Provider: p}}, catalog.CodeSettings{})
	require.NoError(t, err)
	base, err := catalog.Parse([]byte("agents:\n  - {name: x, model: scripted, script: [{text: hi}]}\n  - {name: y, model: scripted, script: [{text: hi}]}\n"), catalog.Options{})
	require.NoError(t, err)
	out, shadowed := catalog.Overlay(base, code)
	require.Equal(t, []string{"x"}, shadowed)
	require.Equal(t, []string{"x", "y"}, out.Names())
	x, _ := out.Get("x")
	require.True(t, x.Code)
}
