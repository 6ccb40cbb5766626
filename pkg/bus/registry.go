package bus

import (
	"encoding/json"
	"time"
)

// Agents registry requests and replies (<p>.api.registry.*). Definitions
// travel as JSON in the agents-file schema; the registry is
// pkg/registry.

// RegistryApplyRequest applies an agents file (YAML or JSON text) to the
// registry: every agent it defines is created or updated; with Prune, the
// registry's other agents are deleted.
type RegistryApplyRequest struct {
	File  string `json:"file" msgpack:"file"`
	Prune bool   `json:"prune,omitempty" msgpack:"prune,omitempty"`
}

// Validate checks the request.
func (r *RegistryApplyRequest) Validate() error {
	if r.File == "" {
		return &FieldError{Field: "file", Reason: "is required: the agents file's text (YAML or JSON)"}
	}
	return nil
}

// RegistryApplyReply says what an apply changed, and which of the agents
// applied no live worker serves yet.
type RegistryApplyReply struct {
	Created   []string `json:"created" msgpack:"created"`
	Updated   []string `json:"updated" msgpack:"updated"`
	Unchanged []string `json:"unchanged" msgpack:"unchanged"`
	Deleted   []string `json:"deleted" msgpack:"deleted"`
	Revision  uint64   `json:"revision" msgpack:"revision"`
	Unserved  []string `json:"unserved,omitempty" msgpack:"unserved,omitempty"`
}

// Validate implements Control.
func (r *RegistryApplyReply) Validate() error { return nil }

// RegistryAgent is one revision of a registry agent.
type RegistryAgent struct {
	Name     string          `json:"name" msgpack:"name"`
	Revision uint64          `json:"revision" msgpack:"revision"`
	Created  time.Time       `json:"created" msgpack:"created"`
	Deleted  bool            `json:"deleted,omitempty" msgpack:"deleted,omitempty"`
	Spec     json.RawMessage `json:"spec,omitempty" msgpack:"spec,omitempty"`
	// Workers counts the live workers serving the agent (listings only).
	Workers *int `json:"workers,omitempty" msgpack:"workers,omitempty"`
}

// RegistryAgentsReply lists registry agents (the current ones, or one
// agent's history).
type RegistryAgentsReply struct {
	Agents []RegistryAgent `json:"agents" msgpack:"agents"`
}

// Validate implements Control.
func (r *RegistryAgentsReply) Validate() error { return nil }

// RegistryGetRequest names an agent, and optionally a revision.
type RegistryGetRequest struct {
	Name     string `json:"name" msgpack:"name"`
	Revision uint64 `json:"revision,omitempty" msgpack:"revision,omitempty"`
}

// Validate checks the name.
func (r *RegistryGetRequest) Validate() error { return ValidateID("name", r.Name) }

// RegistryListRequest asks for every agent of the registry.
type RegistryListRequest struct{}

// Validate implements Control.
func (r *RegistryListRequest) Validate() error { return nil }

// Validate implements Control.
func (r *RegistryAgent) Validate() error { return nil }
