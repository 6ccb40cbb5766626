// Package gateway is the HTTP face of a Lovia fleet
// (docs/protocol.md#http-gateway): browsers and scripts submit runs, follow
// their events as Server-Sent Events, approve, cancel and steer them, and
// read sessions, without speaking NATS. A [Gateway] holds no run state: it
// calls a [service.API] in process and tails events with a [client.Client],
// so any number of gateways can serve one fleet. While started it also
// serves the `lovia` NATS micro service, like every worker.
//
// # Routes
//
//	POST   /v1/runs                              submit a run request (JSON or msgpack by Content-Type)
//	GET    /v1/runs                              list runs (filters, cursor, counts by status)
//	GET    /v1/runs/{id}                         status
//	GET    /v1/runs/{id}/describe                status, history, what it awaits, children
//	GET    /v1/runs/{id}/events                  events as SSE
//	POST   /v1/runs/{id}/approvals/{call_id}     {decision: "approve"|"reject", reason?}
//	POST   /v1/runs/{id}/cancel                  {reason?}
//	POST   /v1/runs/{id}/messages                {content, key?} → {token}
//	DELETE /v1/runs/{id}/messages/{token}        → {removed}
//	GET    /v1/sessions/{id}                     segments
//	POST   /v1/sessions/{id}/rewind              {keep_entries} → {removed}
//	GET    /v1/sessions                          the sessions, newest run first
//	GET    /v1/sessions/{id}/export              the session's entries as JSON lines
//	DELETE /v1/sessions/{id}                     → {deleted} (409 while a run of it is live)
//	POST   /v1/sessions/{id}/trim                {keep_chars, keep_runs} → {trimmed}
//	GET    /v1/agents                            the agents
//	GET    /v1/workers                           the live workers
//	…      /v1/registry/agents[/{name}[/history]] the agents registry
//	…      /v1/schedules[/{name}[/pause|/resume]] scheduled runs
//	GET    /healthz                              liveness: 503 once a NATS connection is closed for good
//	GET    /readyz                               readiness: 200 while NATS is connected, else 503
//	GET    /metrics                              Prometheus
//	GET    /, /console/…                         the fleet console (package console); no token
//
// Replies are JSON. A submit answers 202 with the submit reply (200 when a
// completed run is replayed) and a Location header; with
// "Accept: text/event-stream" it answers with the run's events instead, at
// once. Errors are {"error": {type, message, hint}} with the status of the
// type: 400 InvalidRequest, 404 NotFound or UnknownAgent, 401 Unauthorized,
// 405 MethodNotAllowed, 413 and 415 for bodies too large or of another
// Content-Type, 503 Unavailable, 504 Timeout, 500 InternalError.
//
// # Event streams
//
// Each SSE event is one envelope: "id:" is its seq, "event:" its type and
// "data:" the JSON envelope {run_id, seq, type, time, agent, turn, data},
// whatever encoding the run's events are stored in. A stream starts at the
// first event, or after the seq in the Last-Event-ID header (an
// EventSource sends it when it reconnects; ?last_event_id= does the same,
// ?from_seq=N starts at N), and ends after the terminal event
// (run_completed or run_failed). A comment line goes out after every
// [Config].Heartbeat of silence. A client that goes away ends its stream
// and the JetStream consumer behind it; Stop ends every stream, and the
// clients resume on another gateway with Last-Event-ID.
//
// # Authentication
//
// With [Config].Tokens set, every route but GET /healthz, GET /readyz and
// GET /metrics needs "Authorization: Bearer <token>"; tokens are compared
// in constant time.
//
// # NATS away
//
// While the fleet's NATS connection is not connected, every /v1 route
// answers 503 Unavailable (never UnknownAgent or NotFound, which is what
// a fleet out of reach looks like); GET /healthz stays 200 while the
// connection reconnects, GET /readyz is 503.
//
// # Tenants
//
// With [Config].Tenants, one gateway serves several tenants, each a fleet
// in its own NATS account ([Tenant]: its API, client and connection), and
// each token is bound to one tenant: the token picks the fleet that
// answers, so another tenant's runs do not exist for it. Metrics carry a
// "tenant" label; GET /healthz and GET /readyz report each tenant's
// connection. One tenant's outage leaves the others served: its requests
// are 503 and GET /readyz stays 200, "degraded". A tenant given with
// [Tenant].Open is opened in the background once the gateway serves, so
// a tenant whose NATS is out of reach at start does not hold the others
// up.
//
// # Lifecycle
//
// [New] validates the config and starts nothing. [Gateway.Start] listens
// (use ":0" and [Gateway.Addr] for a free port) and starts the micro
// service; [Gateway.Stop] shuts both down gracefully. [Gateway.Handler]
// serves the routes on any server, for tests and embedding.
package gateway
