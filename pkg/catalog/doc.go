// Package catalog loads the agents file (docs/protocol.md#agents-file) into
// ready-to-run agents: models resolved through a provider registry, tools
// picked from a tool set, handoffs linked by name, approval gates and
// scripted models for tests. A built-in demo agent exists when no file is
// given.
package catalog
