// Package console is the fleet console: a browser UI to list, inspect,
// approve and steer runs, served by the gateway at "/". It is one
// self-contained bundle of hand-written HTML, CSS and JavaScript modules
// embedded in the binary with Go embed: nothing is fetched from a CDN and
// nothing is built at run time.
//
// # Pages
//
// The console routes by the URL fragment:
//
//	#/runs              the runs, live: filters, status chips with counts, auto-refresh; start a run
//	#/runs/{id}         one run's timeline over SSE: streaming text, tool calls paired with their results,
//	                    approvals (approve / reject, the answer to ask_human), handoffs, compactions,
//	                    the todo list; cancel and inject a message
//	#/sessions/{id}     a conversation's segments
//	#/agents            the agents the fleet serves, with their tools and schemas
//	#/workers           the live workers
//
// Every page reads the gateway's HTTP API (docs/protocol.md#http-gateway)
// with fetch. The bearer token, when the gateway needs one, is kept in the
// browser's localStorage and sent as "Authorization: Bearer"; event streams
// are read with fetch and a stream reader (not EventSource, which cannot
// send headers), and a dropped stream reconnects with Last-Event-ID set to
// the last event shown, so no event is lost or shown twice. A run's stream
// ends with a submission's terminal event; when the run's description
// counts more submissions than the page has seen end (the run was
// resubmitted), the page follows on from the last event shown. The console can
// also talk to a gateway of another origin that allows it (--cors-origin).
//
// # What a run page shows
//
// A run page's state is derived from the run's events, never from which
// of two racing replies came last: a tool call's card shows its outcome,
// else the run's end (a call a cancel cut short is "cancelled with the
// run"), else that it runs, else its decision, else the decision this
// page sent, else the wait for one; the status chip follows the terminal
// event shown over an older status reply. A turn run again after a resume
// is not drawn twice unless streamed output was discarded, and a message
// injected from the page that no turn took before the run ended is
// reported in the timeline, with a withdraw (the browser keeps its
// injected messages in localStorage until a turn takes them or they are
// withdrawn, so a reload still tells). An unknown run id says so, offers
// no controls, and is looked up again every 5 seconds.
//
// # Serving
//
// [Handler] serves the bundle: the page at "/" and its assets under
// [AssetsPrefix]; [Serves] tells a server which requests are the
// console's. The assets hold no run data, so the gateway serves them
// without a token: the page asks for the token and sends it on every API
// call.
package console
