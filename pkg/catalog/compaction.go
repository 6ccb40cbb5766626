package catalog

import (
	"errors"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/compaction"
)

// CompactionSpec is an agent's `compaction:` section: the thresholds of
// the context compaction of its runs, or `compaction: off` to send the
// whole transcript every turn. Without the section the agent gets the
// process's policy (a worker's: the defaults, with the fleet's results
// store). The section applies to the runs the agent starts; an agent
// reached by a handoff runs under the policy of the run's first agent.
//
//	compaction:
//	  context_window: 128000
//	  compact_at: 80%
//	  compact_to: 50%
type CompactionSpec struct {
	// Off sends the whole transcript (`compaction: off`).
	Off bool `yaml:"-" json:"off,omitempty"`
	// ContextWindow is the model's window in tokens (0: asked of the
	// provider where it can tell).
	ContextWindow int `yaml:"context_window" json:"context_window,omitempty"`
	// CompactAt and CompactTo are the trigger and the target: a fraction
	// ("0.85", "85%") of the usable window or a number of tokens
	// (defaults 85% and 60%).
	CompactAt string `yaml:"compact_at" json:"compact_at,omitempty"`
	CompactTo string `yaml:"compact_to" json:"compact_to,omitempty"`
	// KeepRecentTokens is the recent tail no stage touches (0: a fifth of
	// the usable window).
	KeepRecentTokens int `yaml:"keep_recent_tokens" json:"keep_recent_tokens,omitempty"`
	// ReserveOutputTokens are kept free for the answer (unset: 16384; 0:
	// none).
	ReserveOutputTokens *int `yaml:"reserve_output_tokens" json:"reserve_output_tokens,omitempty"`
	// Stages are the stages that run, in order, of offload, clear and
	// summarize (unset: all three).
	Stages []string `yaml:"stages" json:"stages,omitempty"`
}

// UnmarshalYAML decodes `off` or the section's map.
func (c *CompactionSpec) UnmarshalYAML(n *yaml.Node) error {
	if isOff(n) {
		*c = CompactionSpec{Off: true}
		return nil
	}
	if err := checkKeys(n, reflect.TypeFor[CompactionSpec](), "compaction", "compaction: off"); err != nil {
		return err
	}
	type plain CompactionSpec
	if err := n.Decode((*plain)(c)); err != nil {
		return err
	}
	_, err := c.config()
	return atLine(err, n)
}

var stageNames = []string{"offload", "clear", "summarize"}

// config is the compaction configuration of the section (without store
// nor logger), validated.
func (c *CompactionSpec) config() (compaction.Config, error) {
	var cfg compaction.Config
	if c.ContextWindow < 0 {
		return cfg, fieldErr("compaction.context_window", "%d is negative", c.ContextWindow)
	}
	cfg.ContextWindow = c.ContextWindow
	for _, w := range []struct {
		field, v string
		to       *compaction.Amount
	}{{"compaction.compact_at", c.CompactAt, &cfg.CompactAt}, {"compaction.compact_to", c.CompactTo, &cfg.CompactTo}} {
		if w.v == "" {
			continue
		}
		a, err := compaction.ParseAmount(w.v)
		if err != nil {
			return cfg, fieldErr(w.field, "%q: give a fraction of the window (0.8, 80%%) or a number of tokens (100000)", w.v)
		}
		*w.to = a
	}
	if c.KeepRecentTokens < 0 {
		return cfg, fieldErr("compaction.keep_recent_tokens", "%d is negative", c.KeepRecentTokens)
	}
	cfg.KeepRecentTokens = c.KeepRecentTokens
	if r := c.ReserveOutputTokens; r != nil {
		switch {
		case *r < 0:
			return cfg, fieldErr("compaction.reserve_output_tokens", "%d is negative (0 keeps no reserve)", *r)
		case *r == 0:
			cfg.ReserveOutputTokens = compaction.None
		default:
			cfg.ReserveOutputTokens = *r
		}
	}
	if c.Stages != nil && len(c.Stages) == 0 {
		return cfg, fieldErr("compaction.stages", "empty: name some of %s, or write compaction: off", strings.Join(stageNames, ", "))
	}
	for _, s := range c.Stages {
		var st compaction.Stage
		switch s {
		case "offload":
			st = compaction.Offload{}
		case "clear":
			st = compaction.Clear{}
		case "summarize":
			st = compaction.Summarize{}
		default:
			return cfg, fieldErr("compaction.stages", "unknown stage %q (known: %s)", s, strings.Join(stageNames, ", "))
		}
		for _, have := range cfg.Stages {
			if have.Name() == s {
				return cfg, fieldErr("compaction.stages", "%q is named twice", s)
			}
		}
		cfg.Stages = append(cfg.Stages, st)
	}
	if err := cfg.Validate(); err != nil {
		// The watermarks' order, named as the file names them.
		msg := strings.TrimPrefix(err.Error(), compaction.ErrInvalidConfig.Error()+": ")
		msg = strings.NewReplacer("CompactTo", "compact_to", "CompactAt", "compact_at").Replace(msg)
		return cfg, fieldErr("compaction", "%s", msg)
	}
	return cfg, nil
}

// applyCompaction sets the agent's context policy from its `compaction:`
// section: none (the process's default), off, or a policy built by
// opts.Compaction.
func applyCompaction(a *loop.Agent, c *CompactionSpec, opts Options) error {
	switch {
	case c == nil:
		return nil
	case c.Off:
		a.ContextPolicy = loop.NoopContextPolicy{}
		return nil
	}
	cfg, err := c.config()
	if err != nil {
		return err
	}
	if opts.Compaction == nil {
		a.ContextPolicy = compaction.New(cfg)
		return nil
	}
	p, err := opts.Compaction(cfg)
	if err != nil {
		return err
	}
	if p == nil {
		return errors.New("compaction: Options.Compaction returned no policy")
	}
	a.ContextPolicy = p
	return nil
}
