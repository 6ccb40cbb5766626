// Package lovia makes a Go program a member of a Lovia Fleet: the program
// defines its agents in Go — tools from Go functions, with dependencies,
// guardrails, hooks, a Go output type, dynamic instructions, model
// settings, retry and context policies, handoffs, agents as tools — and
// one call serves them on the fleet, with every fleet guarantee the
// agents file gets: checkpoints, resume on another process of the same
// program after a crash, parked approvals, routing by agent, listings
// with the tools' schemas.
//
// # A worker in Go
//
//	package main
//
//	import (
//		"context"
//
//		"github.com/lovia-fleet/lovia"
//		"github.com/lovia-fleet/lovia/pkg/loop"
//	)
//
//	type Sum struct{ A, B int }
//
//	func main() {
//		add := loop.NewTool("add", "add two numbers", func(_ context.Context, _ *loop.RunContext, in Sum) (int, error) {
//			return in.A + in.B, nil
//		})
//		lovia.Main(lovia.Config{Agents: []*loop.Agent{{
//			Name: "assistant", Instructions: "Use add for sums.", Model: "openai:gpt-4.1-mini", Tools: []*loop.Tool{add},
//		}}})
//	}
//
// The program's command line is lovia's: with no arguments (or `worker`)
// it is `lovia worker` serving the program's agents, with all of its
// flags and environment variables (--nats, $NATS_URL, credentials, TLS,
// --metrics, tracing, --log-format, --registry, --agents …) and its
// SIGTERM handling (stop claiming, let turns reach a checkpoint, release
// the rest). `go run . dev` is `lovia dev` with the program's agents: an
// embedded NATS server, the gateway and workers in one process. The
// client commands work too: `go run . run --agent assistant "what is 2 + 3?"`.
// Run as many processes of the program as you like: a run's holder dies,
// another process resumes it from its last checkpoint.
//
// # Dependencies
//
// [Config.Deps] is given to every run as RunContext.Deps: open the
// database once in main, type-assert it in the tool. It is never
// persisted; a run resumed elsewhere gets that process's Deps.
//
// # Mixing with the agents file and the registry
//
// --agents FILE adds the file's agents to the program's; --registry
// serves the agents registry beside them. A name defined twice (in Go and
// in the file) stops the program at start-up, naming the agent. A
// registry agent of a code agent's name is shadowed: the code agent is
// served, with a warning in the log.
//
// # Why one call
//
// Temporal's Go SDK asks for three steps: worker.New(client, queue, opts),
// Register each workflow and activity, then Run(worker.InterruptCh()) —
// and the program parses its own flags, dials the server and wires
// metrics. A Lovia worker has nothing to register beyond its agents (the
// tools travel inside each *loop.Agent) and its process flags are the
// fleet's, documented once for `lovia worker`, so [Main] takes a [Config]
// of agents and dependencies and gives the rest: flags, connection,
// API service, probes, shutdown. Programs that parse their own flags call
// [Run] with the arguments left over and a context they end; tests and
// examples call [Once], which runs one run on an in-process fleet.
package lovia
