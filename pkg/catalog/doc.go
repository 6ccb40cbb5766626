// Package catalog loads the agents file (docs/protocol.md#agents-file) into
// ready-to-run agents: models resolved through a provider registry, tools
// picked from a tool set, handoffs linked by name, approval gates and
// scripted models for tests. A built-in demo agent exists when no file is
// given.
//
// # Plugins and standard tools
//
// An agent's `plugins:` section ([PluginsSpec]) adds the Todo, Skills and
// Memory plugins (pkg/plugins/...); the fleet-native ones keep their state
// in the JetStream stores of [Options.Plugins]. Its `http:` section
// ([HTTPSpec]) bounds the http_request and read_page tools it names.
//
// # Versions
//
// [Agent.Digest] identifies an agent's definition (instructions, model and
// settings, tools and their schemas, handoffs, plugins, output schema,
// limits); [VersionOf] adds a worker's build id. Workers record the
// version a run started on and route its resumes to workers of that
// version (docs/protocol.md#agent-versions).
package catalog
