package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// DigestLen is the length of an agent's definition digest ([Agent.Digest]),
// in hex characters.
const DigestLen = 12

// Digest identifies the agent's definition: the first [DigestLen] hex
// characters of a SHA-256 over a canonical encoding of what a run of it
// depends on — its name, static instructions, model, model settings,
// output schema, provider retry policy, tool defaults, its tools (name,
// description, JSON Schema and options, sorted by name), its handoffs'
// target agents and tool names, its plugins' names, and its fleet settings
// (max turns, approval timeout). It is the same in every process that
// builds the same definition, whatever the order of its tools or the key
// order of its schemas.
//
// What code does is not in it: Go functions (InstructionsFunc, Fragments,
// a tool's Func, hooks, guardrails, policies) cannot be hashed — only
// whether an agent has dynamic instructions is. Nor are the tools a plugin
// resolves while the worker runs (MCP servers, tool services: they change
// when those are deployed, not the worker). Give the worker a build id
// (worker.Config.BuildID) to tell code changes apart; see [VersionOf].
//
// The agents of a catalog that [Build] made have it computed once, as
// built (a change made to such an agent afterwards is not in it); any
// other Agent computes it on every call (about 20µs).
func (a *Agent) Digest() string {
	if a.digest != "" {
		return a.digest
	}
	return a.computeDigest()
}

func (a *Agent) computeDigest() string {
	sum := sha256.Sum256(a.canonical())
	return hex.EncodeToString(sum[:])[:DigestLen]
}

// pinDigests computes the digest of each of the catalog's agents, once
// they are built and linked, before the catalog is shared.
func (c *Catalog) pinDigests() {
	for _, a := range c.agents {
		a.digest = a.computeDigest()
	}
}

// VersionOf is the version a worker with build id build gives agent a:
// its [Agent.Digest], followed by "+" and the build id when there is one
// ("3f2a9c81d0e4+v1.4.2").
func VersionOf(a *Agent, build string) string {
	if build == "" {
		return a.Digest()
	}
	return a.Digest() + "+" + build
}

// versionDoc is what the digest covers, in a fixed field order.
type versionDoc struct {
	Name                string           `json:"name"`
	Instructions        string           `json:"instructions"`
	DynamicInstructions bool             `json:"dynamic_instructions,omitempty"`
	Fragments           int              `json:"fragments,omitempty"`
	Model               string           `json:"model"`
	Settings            versionSettings  `json:"settings"`
	Output              *versionOutput   `json:"output,omitempty"`
	Retry               *versionRetry    `json:"retry,omitempty"`
	ToolRetries         int              `json:"default_tool_retries,omitempty"`
	ToolTimeout         time.Duration    `json:"default_tool_timeout,omitempty"`
	MaxToolOutput       int              `json:"max_tool_output_chars,omitempty"`
	Tools               []versionTool    `json:"tools"`
	Handoffs            []versionHandoff `json:"handoffs"`
	Plugins             []string         `json:"plugins"`
	MaxTurns            int              `json:"max_turns,omitempty"`
	ApprovalTimeout     time.Duration    `json:"approval_timeout,omitempty"`
}

type versionSettings struct {
	Temperature       *float64                  `json:"temperature,omitempty"`
	TopP              *float64                  `json:"top_p,omitempty"`
	MaxTokens         int                       `json:"max_tokens,omitempty"`
	Stop              []string                  `json:"stop,omitempty"`
	ParallelToolCalls *bool                     `json:"parallel_tool_calls,omitempty"`
	ProviderOptions   map[string]map[string]any `json:"provider_options,omitempty"`
}

type versionOutput struct {
	Name     string          `json:"name"`
	Schema   json.RawMessage `json:"schema"`
	Strict   bool            `json:"strict,omitempty"`
	TypeName string          `json:"type_name,omitempty"`
}

type versionRetry struct {
	MaxAttempts        int           `json:"max_attempts"`
	BaseDelay          time.Duration `json:"base_delay"`
	MaxDelay           time.Duration `json:"max_delay"`
	NoRestartOnPartial bool          `json:"no_restart_on_partial,omitempty"`
}

type versionTool struct {
	Name           string          `json:"name"`
	Description    string          `json:"description"`
	Parameters     json.RawMessage `json:"parameters"`
	Strict         bool            `json:"strict,omitempty"`
	Sequential     bool            `json:"sequential,omitempty"`
	NeedsApproval  bool            `json:"needs_approval,omitempty"`
	Approval       bool            `json:"approval_predicate,omitempty"`
	Retries        *int            `json:"retries,omitempty"`
	Timeout        time.Duration   `json:"timeout,omitempty"`
	MaxOutputChars int             `json:"max_output_chars,omitempty"`
	ReturnsImages  bool            `json:"returns_images,omitempty"`
	Policies       int             `json:"policies,omitempty"`
}

type versionHandoff struct {
	Agent       string `json:"agent"`
	ToolName    string `json:"tool_name,omitempty"`
	Description string `json:"description,omitempty"`
}

// canonical is the encoding the digest is taken over.
func (a *Agent) canonical() []byte {
	la := a.Agent
	if la == nil {
		la = &loop.Agent{}
	}
	s := la.Settings
	doc := versionDoc{
		Name: la.Name, Instructions: la.Instructions,
		DynamicInstructions: la.InstructionsFunc != nil, Fragments: len(la.Fragments),
		Model: la.Model,
		Settings: versionSettings{
			Temperature: s.Temperature, TopP: s.TopP, MaxTokens: s.MaxTokens, Stop: s.Stop,
			ParallelToolCalls: s.ParallelToolCalls, ProviderOptions: s.ProviderOptions,
		},
		ToolRetries: la.DefaultToolRetries, ToolTimeout: la.DefaultToolTimeout, MaxToolOutput: la.MaxToolOutputChars,
		Tools: []versionTool{}, Handoffs: []versionHandoff{}, Plugins: []string{},
		MaxTurns: a.MaxTurns, ApprovalTimeout: a.ApprovalTimeout,
	}
	if o := la.Output; o != nil {
		doc.Output = &versionOutput{Name: o.Name, Schema: canonicalJSON(o.Schema), Strict: o.Strict, TypeName: o.TypeName}
	}
	if r := la.Retry; r != nil {
		doc.Retry = &versionRetry{MaxAttempts: r.MaxAttempts, BaseDelay: r.BaseDelay, MaxDelay: r.MaxDelay, NoRestartOnPartial: r.NoRestartOnPartial}
	}
	for _, t := range la.Tools {
		if t == nil {
			continue
		}
		doc.Tools = append(doc.Tools, versionTool{
			Name: t.Name, Description: t.Description, Parameters: canonicalJSON(t.Parameters), Strict: t.Strict,
			Sequential: t.Sequential, NeedsApproval: t.NeedsApproval, Approval: t.Approval != nil, Retries: t.Retries,
			Timeout: t.Timeout, MaxOutputChars: t.MaxOutputChars, ReturnsImages: t.ReturnsImages, Policies: len(t.Policies),
		})
	}
	slices.SortFunc(doc.Tools, func(x, y versionTool) int { return strings.Compare(x.Name, y.Name) })
	for _, h := range la.Handoffs {
		name := ""
		if h.Agent != nil {
			name = h.Agent.Name
		}
		doc.Handoffs = append(doc.Handoffs, versionHandoff{Agent: name, ToolName: h.ToolName, Description: h.Description})
	}
	slices.SortFunc(doc.Handoffs, func(x, y versionHandoff) int {
		if c := strings.Compare(x.Agent, y.Agent); c != 0 {
			return c
		}
		return strings.Compare(x.ToolName, y.ToolName)
	})
	for _, p := range la.Plugins {
		if p != nil {
			doc.Plugins = append(doc.Plugins, p.Name())
		}
	}
	slices.Sort(doc.Plugins)
	out, err := json.Marshal(doc)
	if err != nil {
		// Only a provider option json cannot encode (a func, a channel):
		// digest what can be told of the rest.
		doc.Settings.ProviderOptions = nil
		out, _ = json.Marshal(doc)
	}
	return out
}

// canonicalJSON re-encodes a JSON document with sorted object keys and no
// insignificant space; invalid JSON is kept as given, compacted when it
// can be.
func canonicalJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) == nil {
		if out, err := json.Marshal(v); err == nil {
			return out
		}
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) == nil {
		return buf.Bytes()
	}
	return json.RawMessage(strconvQuote(string(raw)))
}

// strconvQuote is raw as a JSON string, for bytes that are not JSON.
func strconvQuote(s string) string {
	out, _ := json.Marshal(s)
	return string(out)
}
