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
// # Model, retry, tools and context
//
// An agent's `settings:` ([SettingsSpec]) become its model settings,
// `retry:` ([RetrySpec]) its provider retry policy, `tool_defaults:`
// ([ToolDefaultsSpec]) the timeout, retries and output cap of its tools,
// `compaction:` ([CompactionSpec]) its context policy (built through
// [Options.Compaction]) and `as_tools:` ([AsToolSpec]) ask_<agent> tools
// that run other agents of the file. `instructions_file:` is read by
// [ReadFile] relative to the agents file's folder.
//
// # Versions
//
// [Agent.Digest] identifies an agent's definition (instructions, model and
// settings, tools and their schemas, handoffs, plugins, output schema,
// limits); [VersionOf] adds a worker's build id. Workers record the
// version a run started on and route its resumes to workers of that
// version (docs/protocol.md#agent-versions).
//
// # Agents defined in Go
//
// [FromAgents] builds a catalog of *loop.Agent values a program defines
// (with the code agents their handoffs lead to), each marked
// [Agent.Code] with a Spec synthesized for listings; [CodeSettings] are
// their fleet settings. [Merge] joins it with an agents file's catalog,
// refusing a name defined twice; [Overlay] lets code agents shadow
// registry ones.
package catalog
