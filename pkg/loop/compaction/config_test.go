package compaction_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop/compaction"
)

func TestConfig(t *testing.T) {
	t.Parallel()

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		cfg := compaction.New(compaction.Config{}).Config()
		require.Equal(t, compaction.Fraction(0.85), cfg.CompactAt)
		require.Equal(t, compaction.Fraction(0.60), cfg.CompactTo)
		require.Equal(t, 16384, cfg.ReserveOutputTokens)
		require.Equal(t, 1600, cfg.ImageTokens)
		require.Zero(t, cfg.ContextWindow, "the window is asked of the provider")
		require.Zero(t, cfg.KeepRecentTokens, "a fifth of the usable window")
		require.Nil(t, cfg.Store)
		names := []string{}
		for _, s := range cfg.Stages {
			names = append(names, s.Name())
		}
		require.Equal(t, []string{"offload", "clear", "summary"}, names)
		require.IsType(t, &compaction.LLMSummarizer{}, cfg.Summarizer)
	})

	t.Run("NoReserve", func(t *testing.T) {
		t.Parallel()
		cfg := compaction.New(compaction.Config{ReserveOutputTokens: compaction.None}).Config()
		require.Zero(t, cfg.ReserveOutputTokens)
	})

	t.Run("ValidateNamesTheField", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			field string
			cfg   compaction.Config
		}{
			{"ContextWindow", compaction.Config{ContextWindow: -1}},
			{"KeepRecentTokens", compaction.Config{KeepRecentTokens: -5}},
			{"ReserveOutputTokens", compaction.Config{ReserveOutputTokens: -7}},
			{"ImageTokens", compaction.Config{ImageTokens: -1}},
			{"CompactAt", compaction.Config{CompactAt: compaction.Fraction(1.5)}},
			{"CompactTo", compaction.Config{CompactTo: compaction.Tokens(-3)}},
			{"CompactTo", compaction.Config{CompactAt: compaction.Fraction(0.5), CompactTo: compaction.Fraction(0.6)}},
			{"CompactTo", compaction.Config{CompactAt: compaction.Tokens(1000), CompactTo: compaction.Tokens(1000)}},
			{"Stages[1]", compaction.Config{Stages: []compaction.Stage{compaction.Clear{}, nil}}},
			{"Stages[1]", compaction.Config{Stages: []compaction.Stage{compaction.Clear{}, compaction.Clear{KeepLast: 1}}}},
		} {
			err := tc.cfg.Validate()
			require.ErrorIs(t, err, compaction.ErrInvalidConfig, tc.field)
			require.Contains(t, err.Error(), tc.field)
			require.PanicsWithValue(t, err.Error(), func() { compaction.New(tc.cfg) })
		}
		require.NoError(t, compaction.Config{CompactAt: compaction.Tokens(100000), CompactTo: compaction.Fraction(0.5)}.Validate(),
			"mixed kinds are ordered when the budget is computed")
	})
}

func TestAmount(t *testing.T) {
	t.Parallel()

	t.Run("Of", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, 850, compaction.Fraction(0.85).Of(1000))
		require.Equal(t, 700, compaction.Tokens(700).Of(1000))
		require.Equal(t, 1000, compaction.Tokens(5000).Of(1000), "absolute watermarks are capped at the usable window")
		require.True(t, compaction.Amount{}.IsZero())
		require.Equal(t, "85%", compaction.Fraction(0.85).String())
		require.Equal(t, "120000 tokens", compaction.Tokens(120000).String())
	})

	t.Run("Parse", func(t *testing.T) {
		t.Parallel()
		for in, want := range map[string]compaction.Amount{
			"0.85": compaction.Fraction(0.85), "85%": compaction.Fraction(0.85), " 1 ": compaction.Fraction(1),
			"120000": compaction.Tokens(120000), "2": compaction.Tokens(2),
		} {
			got, err := compaction.ParseAmount(in)
			require.NoError(t, err, in)
			require.InDelta(t, func() float64 { f, _ := want.Fraction(); return f }(), func() float64 { f, _ := got.Fraction(); return f }(), 1e-9, in)
			wt, _ := want.Tokens()
			gt, _ := got.Tokens()
			require.Equal(t, wt, gt, in)
		}
		for _, bad := range []string{"", "x", "-0.5", "0", "150%", "1.5", "NaN"} {
			_, err := compaction.ParseAmount(bad)
			require.ErrorIs(t, err, compaction.ErrInvalidConfig, bad)
		}
	})

	t.Run("JSON", func(t *testing.T) {
		t.Parallel()
		var v struct {
			At compaction.Amount `json:"compact_at"`
			To compaction.Amount `json:"compact_to"`
		}
		require.NoError(t, json.Unmarshal([]byte(`{"compact_at": 0.9, "compact_to": "50000"}`), &v))
		require.Equal(t, compaction.Fraction(0.9), v.At)
		require.Equal(t, compaction.Tokens(50000), v.To)
		b, err := json.Marshal(v)
		require.NoError(t, err)
		require.JSONEq(t, `{"compact_at": 0.9, "compact_to": 50000}`, string(b))
	})
}
