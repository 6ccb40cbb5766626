package catalog

import (
	"maps"
	"math"
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// SettingsSpec is an agent's `settings:` section: the sampling and
// request knobs of its model calls ([loop.ModelSettings]). Unset fields
// leave the provider's default.
//
//	settings:
//	  temperature: 0.2
//	  max_tokens: 4096
//	  provider_options: {reasoning_effort: low}
type SettingsSpec struct {
	Temperature *float64 `yaml:"temperature" json:"temperature,omitempty"`
	TopP        *float64 `yaml:"top_p" json:"top_p,omitempty"`
	// MaxTokens caps each answer (0: the provider's default).
	MaxTokens int      `yaml:"max_tokens" json:"max_tokens,omitempty"`
	Stop      []string `yaml:"stop" json:"stop,omitempty"`
	// ParallelToolCalls lets the model call several tools in one turn
	// (false asks for one call per turn).
	ParallelToolCalls *bool `yaml:"parallel_tool_calls" json:"parallel_tool_calls,omitempty"`
	// ProviderOptions are top-level request fields sent verbatim to the
	// agent's model adapter (a null value removes a field the adapter
	// would send).
	ProviderOptions map[string]any `yaml:"provider_options" json:"provider_options,omitempty"`
}

// UnmarshalYAML decodes the section, refusing unknown keys and invalid
// values with their line.
func (s *SettingsSpec) UnmarshalYAML(n *yaml.Node) error {
	if err := checkKeys(n, reflect.TypeFor[SettingsSpec](), "settings", "settings: {temperature: 0.2}"); err != nil {
		return err
	}
	type plain SettingsSpec
	if err := n.Decode((*plain)(s)); err != nil {
		return err
	}
	return atLine(s.validate(), n)
}

func (s *SettingsSpec) validate() error {
	if s == nil {
		return nil
	}
	if t := s.Temperature; t != nil && (math.IsNaN(*t) || *t < 0 || *t > 2) {
		return fieldErr("settings.temperature", "%v is outside 0 to 2", *t)
	}
	if p := s.TopP; p != nil && (math.IsNaN(*p) || *p < 0 || *p > 1) {
		return fieldErr("settings.top_p", "%v is outside 0 to 1", *p)
	}
	if s.MaxTokens < 0 {
		return fieldErr("settings.max_tokens", "%d is negative (leave it out for the provider's default)", s.MaxTokens)
	}
	for i, st := range s.Stop {
		if st == "" {
			return fieldErr("settings.stop", "entry %d is empty: a stop sequence needs text", i)
		}
	}
	for _, k := range sortedKeys(s.ProviderOptions) {
		if k == "" || strings.ContainsAny(k, ".*?|#@") {
			return fieldErr("settings.provider_options", "key %q: keys are top-level request fields of the model's API (e.g. reasoning_effort)", k)
		}
	}
	return nil
}

// modelSettings maps the section onto the loop's settings; provider
// options go to the adapter named adapter (the agent's model's).
func (s *SettingsSpec) modelSettings(adapter string) loop.ModelSettings {
	var out loop.ModelSettings
	if s == nil {
		return out
	}
	if s.Temperature != nil {
		t := *s.Temperature
		out.Temperature = &t
	}
	if s.TopP != nil {
		p := *s.TopP
		out.TopP = &p
	}
	if s.ParallelToolCalls != nil {
		b := *s.ParallelToolCalls
		out.ParallelToolCalls = &b
	}
	out.MaxTokens = s.MaxTokens
	out.Stop = append([]string(nil), s.Stop...)
	if len(s.ProviderOptions) > 0 {
		out.ProviderOptions = map[string]map[string]any{adapter: maps.Clone(s.ProviderOptions)}
	}
	return out
}

// RetrySpec is an agent's `retry:` section: how its failed model calls
// are retried ([loop.RetryPolicy]); `retry: off` makes one attempt. Unset
// fields keep the default (5 attempts, 1s doubling to 30s, restarting a
// turn whose streamed output was cut).
//
//	retry:
//	  attempts: 3
//	  base_delay: 2s
type RetrySpec struct {
	// Off makes one attempt (`retry: off`).
	Off bool `yaml:"-" json:"off,omitempty"`
	// Attempts counts calls, the first included (1: no retry).
	Attempts  int      `yaml:"attempts" json:"attempts,omitempty"`
	BaseDelay Duration `yaml:"base_delay" json:"base_delay,omitempty"`
	MaxDelay  Duration `yaml:"max_delay" json:"max_delay,omitempty"`
	// RestartOnPartial retries a call that failed after streaming output
	// (the turn restarts); false ends the run instead.
	RestartOnPartial *bool `yaml:"restart_on_partial" json:"restart_on_partial,omitempty"`
}

// UnmarshalYAML decodes `off` or the section's map.
func (r *RetrySpec) UnmarshalYAML(n *yaml.Node) error {
	if isOff(n) {
		*r = RetrySpec{Off: true}
		return nil
	}
	if err := checkKeys(n, reflect.TypeFor[RetrySpec](), "retry", "retry: off"); err != nil {
		return err
	}
	type plain RetrySpec
	if err := n.Decode((*plain)(r)); err != nil {
		return err
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "attempts" && r.Attempts == 0 {
			return &fieldError{Field: "retry.attempts", Line: n.Content[i].Line, Msg: "0: attempts counts the calls, the first included; write retry: off (or attempts: 1) for no retry"}
		}
	}
	return atLine(r.validate(), n)
}

func (r *RetrySpec) validate() error {
	if r == nil || r.Off {
		return nil
	}
	if r.Attempts < 0 {
		return fieldErr("retry.attempts", "%d is negative (1 is no retry; retry: off too)", r.Attempts)
	}
	p := r.policy()
	if p.BaseDelay > p.MaxDelay {
		return fieldErr("retry.base_delay", "%s is above max_delay %s: lower it or raise max_delay", p.BaseDelay, p.MaxDelay)
	}
	return nil
}

// policy is the loop's retry policy of the section (nil: the default).
func (r *RetrySpec) policy() *loop.RetryPolicy {
	if r == nil {
		return nil
	}
	if r.Off {
		return loop.NoRetry()
	}
	p := loop.DefaultRetryPolicy()
	if r.Attempts > 0 {
		p.MaxAttempts = r.Attempts
	}
	if r.BaseDelay > 0 {
		p.BaseDelay = time.Duration(r.BaseDelay)
	}
	if r.MaxDelay > 0 {
		p.MaxDelay = time.Duration(r.MaxDelay)
	}
	if r.RestartOnPartial != nil {
		p.NoRestartOnPartial = !*r.RestartOnPartial
	}
	return p
}

// ToolDefaultsSpec is an agent's `tool_defaults:` section: what applies
// to each of its tools that sets none of its own.
//
//	tool_defaults:
//	  timeout: 30s
//	  retries: 1
//	  max_output_chars: 50000
type ToolDefaultsSpec struct {
	// Timeout bounds each attempt of a call (0: none).
	Timeout Duration `yaml:"timeout" json:"timeout,omitempty"`
	// Retries are the attempts after a failed first one (0: none).
	Retries int `yaml:"retries" json:"retries,omitempty"`
	// MaxOutputChars caps the output kept of a call (0: 200,000; -1: no
	// cap).
	MaxOutputChars int `yaml:"max_output_chars" json:"max_output_chars,omitempty"`
}

// UnmarshalYAML decodes the section, refusing unknown keys and invalid
// values with their line.
func (d *ToolDefaultsSpec) UnmarshalYAML(n *yaml.Node) error {
	if err := checkKeys(n, reflect.TypeFor[ToolDefaultsSpec](), "tool_defaults", "tool_defaults: {timeout: 30s}"); err != nil {
		return err
	}
	type plain ToolDefaultsSpec
	if err := n.Decode((*plain)(d)); err != nil {
		return err
	}
	return atLine(d.validate(), n)
}

func (d *ToolDefaultsSpec) validate() error {
	switch {
	case d == nil:
	case d.Retries < 0:
		return fieldErr("tool_defaults.retries", "%d is negative (0, the default, is no retry)", d.Retries)
	case d.MaxOutputChars < -1:
		return fieldErr("tool_defaults.max_output_chars", "%d: give a positive cap, or -1 for none", d.MaxOutputChars)
	}
	return nil
}

// applyRunSettings sets the agent's model settings, retry policy and tool
// defaults from its spec.
func applyRunSettings(a *loop.Agent, s Spec) error {
	for _, v := range []interface{ validate() error }{s.Settings, s.Retry, s.ToolDefaults} {
		if err := v.validate(); err != nil {
			return err
		}
	}
	a.Settings = s.Settings.modelSettings(a.Provider.Info().Name)
	a.Retry = s.Retry.policy()
	if d := s.ToolDefaults; d != nil {
		a.DefaultToolTimeout = time.Duration(d.Timeout)
		a.DefaultToolRetries = d.Retries
		a.MaxToolOutputChars = d.MaxOutputChars
	}
	return nil
}
