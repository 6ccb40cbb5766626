// Package toolsvc serves tools as NATS services and calls them: the
// NATS-native way to give agents tools written in any language, scaled
// apart from the workers and discovered at run time.
//
// # Tool services
//
// A tool service is a NATS micro service (the $SRV protocol: `nats micro
// ls` and `nats micro info` show it) whose endpoints are tools. Each
// endpoint listens on <prefix>.tools.<service>.<tool> ([Subject]) in the
// micro default queue group, so the instances of one service share its
// calls, and carries the tool's description and JSON Schema in its
// metadata ([MetaDescription], [MetaSchema]). A service in any language
// that follows this shape is a tool service; [Service] serves any
// [loop.Tool] as one in a few lines:
//
//	svc, _ := toolsvc.New(toolsvc.Config{Conn: nc, Name: "files", Tools: tools, Dedupe: &toolsvc.Dedupe{}})
//	_ = svc.Start(ctx)
//	defer svc.Stop(ctx)
//
// # Calls
//
// A call is a request on the endpoint's subject whose body is the
// arguments object, with the headers [HeaderRunID], [HeaderCallID] and
// [HeaderAgent]. The reply body is the result: text, or JSON. An error
// reply carries the micro error headers (Nats-Service-Error and
// Nats-Service-Error-Code: [CodeInvalidArguments], [CodeToolError],
// [CodeUnavailable], [CodeConflict]). [Discover] lists the tool services of a fleet with
// their instance counts; [Tool] turns one endpoint into a loop tool that
// validates the arguments against the schema before the call and turns
// error replies, no responders and timeouts into error results the model
// sees.
//
// # Exactly-once effects
//
// A worker that dies while a tool call is in flight loses the reply; the
// run's next owner calls the tool again with the same run and call id.
// With [Config.Dedupe], the service keeps each call's reply by its run id
// and call id (a call id is unique only within its run) in a JetStream KV
// bucket for a window (24h by default):
//
//	first call      create <service>.<tool>.<digest of run and call id> = pending(lease, args) → run → store reply
//	same ids again  other arguments → refuse it (CodeConflict), run nothing
//	                reply stored → answer it
//	                pending, lease running → wait for the reply
//	                pending, lease over (instance died) → take over and run
//
// The instance running a call renews its lease every third of it
// ([Dedupe.Lease], 15s by default), so a call may run for longer than the
// lease, and a killed instance's call is taken over a lease after its
// last renewal. A call the tool refused as invalid arguments frees its
// key (nothing ran).
//
// so the tool runs once per call of a run, also for the call in flight at
// a worker's crash. A call without a run id or a call id is not
// deduplicated. Without dedupe, a tool with side effects must be
// idempotent.
package toolsvc
