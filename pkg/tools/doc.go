// Package tools holds the built-in tools of the default worker: echo, ask_human,
// sleep, time_now, calculator, read_file and append_file (the file tools are
// confined to a workspace directory).
//
//	ts, err := tools.Builtin(tools.Config{Workspace: "/srv/work"})
//	agent := &loop.Agent{Name: "a", Tools: ts.Select("calculator", "time_now")}
package tools
