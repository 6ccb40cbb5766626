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
// # Agents defined in Go
//
// [FromAgents] builds a catalog of *loop.Agent values a program defines
// (with the code agents their handoffs lead to), each marked
// [Agent.Code] with a Spec synthesized for listings; [CodeSettings] are
// their fleet settings. [Merge] joins it with an agents file's catalog,
// refusing a name defined twice; [Overlay] lets code agents shadow
// registry ones.
package catalog
