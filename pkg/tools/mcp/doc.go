// Package mcp connects a worker process to MCP (Model Context Protocol)
// servers and offers their tools as ordinary [loop.Tool]s.
//
// # Connections
//
// A [Manager] owns one client session per declared [Server] for the whole
// process, shared by every run: a fleet of a thousand concurrent runs on
// one worker talks to one stdio process per server, not a thousand.
// [New] only validates; [Manager.Start] connects to every server and lists
// its tools; [Manager.Stop] closes the sessions (a stdio server's stdin is
// closed, then it is terminated) and waits for every goroutine it started.
//
// Between the two, a supervisor per server watches the session:
//
//	connect ──ok──▶ connected ──session ends / stops answering──▶ down
//	   ▲                │                                           │
//	   │         tools/list_changed                           backoff (doubling,
//	   │          (list again)                                 MinBackoff..MaxBackoff)
//	   └────────────────────────────────────────────────────────────┘
//
// A stdio server that exits (or is killed) is started again; a failed HTTP
// session is opened again. A tool call while the server is down waits up
// to ConnectWait for the reconnect, then fails.
//
// # Tools
//
// Each server tool becomes a tool named "<server>__<tool>" ([ToolName])
// whose parameters are the server's input JSON Schema; arguments are
// validated against it before the call, and invalid ones never reach the
// server ([loop.InvalidToolArguments]). [Manager.ServerTools] returns the
// list the server last reported, so a run started after a
// notifications/tools/list_changed sees the new tools.
//
// Results are rendered as lovia renders rich results: text content as
// text, images as image parts, audio and binary resources as file parts,
// embedded text resources as text and resource links as a line naming
// the resource. A result with isError true is a [loop.ToolError] with the
// server's text: the model sees it and the run goes on. A transport
// failure or a dead server is a [loop.ToolError] naming the server and the
// next step, matching [ErrServerDown]; it never ends the run.
//
// # Secrets
//
// Env values, headers and the URL may refer to the worker's environment
// as ${NAME}; references are expanded at each connect, and an unset
// variable is an error naming it ([ErrUnsetVariable]).
package mcp
