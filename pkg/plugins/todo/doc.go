// Package todo is the Todo plugin: the model keeps a short task list with
// the todo_write tool, and sees the current list before every model call.
//
// # The tool
//
// todo_write(todos) replaces the whole list. Each item has content, a
// status (pending, in_progress or completed; pending when left out) and an optional active_form
// (the present-continuous phrasing a UI shows while the item runs). At most
// one item may be in_progress: the first one keeps the status, later ones
// are demoted to pending, and the output says so. The tool's output is the
// list the model wrote; its raw result is a [Result], which travels in the
// tool_call_completed event, so a UI can render the list (the "todo" frame
// of docs/protocol.md).
//
// # The reminder
//
// Before each model call the plugin appends the current list, wrapped in
// <system-reminder>, to the tail of that call's view only: it is never
// stored in the transcript, the checkpoint or the session.
//
// # No state of its own
//
// The list is always rebuilt from the newest valid todo_write call in the
// run's transcript ([FromEntries]). A run resumed on another worker, a
// handoff to another agent or a session continued later sees the same list
// with nothing to restore; one [Plugin] serves any number of concurrent
// runs.
//
// Use it from Go as an entry of [loop.Agent.Plugins], or from the agents
// file:
//
//	plugins:
//	  todo: {}
package todo
