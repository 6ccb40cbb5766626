package mcp

import "errors"

// Sentinel errors; match them with errors.Is.
var (
	// ErrUnsetVariable is a ${NAME} reference to a variable the worker's
	// environment does not set.
	ErrUnsetVariable = errors.New("environment variable not set")
	// ErrUnknownServer names a server the manager was not configured with.
	ErrUnknownServer = errors.New("unknown MCP server")
	// ErrNotStarted is a use of a manager before Start or after Stop.
	ErrNotStarted = errors.New("MCP manager not started")
	// ErrServerDown is a call to a server that is not connected (it
	// exited or its session failed, and is being restarted).
	ErrServerDown = errors.New("MCP server not connected")
)
