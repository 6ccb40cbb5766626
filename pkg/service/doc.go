// Package service is the `lovia` NATS micro service (`<prefix>.api.*` of
// docs/protocol.md#subjects): submit, status, approve, cancel, inject, uninject, session
// get and rewind, and agents; and the run listing, runs list and describe
// (docs/protocol.md#listing-runs), answered from an in-memory run index
// (package runindex) the API loads on its first listing and follows live. Every worker and gateway serves it in one
// queue group, so a request is answered while any of them is up.
//
// Decisions, cancels and steering messages are persisted in the stores
// before the reply; the run's owner (whichever worker that is, now or after
// a crash) picks them up from there. A cancel of a run no worker holds —
// queued or parked — is applied here, at once ([API.Cancel]): the run's
// lone run_failed, its failed record, its request gone from the runs
// stream. [API] exposes the same operations as Go methods for in-process
// callers such as the HTTP gateway.
package service
