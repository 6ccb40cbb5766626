package gateway

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// HeaderRunID names the run a submit answered for, on JSON and SSE replies.
const HeaderRunID = "Lovia-Run-Id"

// Examples of valid bodies, for the hints of error replies.
const (
	exampleRun     = `{"agent": "demo", "input": "What is 12*7?"}`
	exampleApprove = `{"decision": "approve"} or {"decision": "reject", "reason": "…"}`
	exampleInject  = `{"content": "also check the weekend"}`
	hintRun        = `fix the field named in the message (docs/protocol.md#run-request); a minimal request is ` + exampleRun
)

// submit handles POST /v1/runs: a run request in JSON or msgpack. The reply
// is the submit reply in JSON (202, or 200 for a replayed completed run);
// with Accept: text/event-stream it is the run's events as SSE instead.
func (g *Gateway) submit(w http.ResponseWriter, r *http.Request) {
	body, herr := g.readBody(w, r)
	if herr != nil {
		g.fail(w, r, herr)
		return
	}
	if len(body) == 0 {
		g.fail(w, r, invalidRequest(http.StatusBadRequest, "the body is empty: a run request is required", "send an object such as "+exampleRun))
		return
	}
	enc, herr := encodingOf(r, body)
	if herr != nil {
		g.fail(w, r, herr)
		return
	}
	req, _, err := bus.DecodeRunRequest(contentType(r), body)
	if errors.Is(err, bus.ErrMalformed) {
		g.fail(w, r, decodeError(enc, "run request", exampleRun, err))
		return
	}
	if err != nil {
		g.fail(w, r, withHint(err, hintRun))
		return
	}
	stream := acceptsEventStream(r)
	var last uint64
	if stream && req.RunID != "" {
		// Events stored before this submission are an earlier one's.
		if last, err = g.pub.LastSeq(r.Context(), req.RunID); err != nil {
			g.fail(w, r, err)
			return
		}
	}
	rep, err := g.cfg.API.Submit(r.Context(), req, enc)
	if err != nil {
		g.fail(w, r, withHint(err, hintRun))
		return
	}
	w.Header().Set("Location", "/v1/runs/"+rep.RunID)
	w.Header().Set(HeaderRunID, rep.RunID)
	if !stream {
		status := http.StatusAccepted
		if rep.Replayed {
			status = http.StatusOK
		}
		g.reply(w, r, status, rep, nil)
		return
	}
	g.stream(w, r, rep.RunID, submitSpan(rep, last))
}

// submitSpan chooses the events a streamed submit shows: a new run's from
// the first; a resubmission's after the events stored before it; for a
// replayed completed run, which publishes nothing new, the stored ones.
func submitSpan(rep *bus.SubmitReply, last uint64) span {
	switch {
	case rep.Replayed:
		return span{from: 1, until: last, stored: true}
	case last > 0:
		return span{from: last + 1}
	}
	return span{from: 1}
}

// acceptsEventStream reports whether the Accept header names
// text/event-stream.
func acceptsEventStream(r *http.Request) bool {
	for _, accept := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(accept, ",") {
			if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/event-stream" {
				return true
			}
		}
	}
	return false
}

// status handles GET /v1/runs/{id}.
func (g *Gateway) status(w http.ResponseWriter, r *http.Request) {
	rep, err := g.cfg.API.Status(r.Context(), r.PathValue("id"))
	g.reply(w, r, http.StatusOK, rep, err)
}

// approve handles POST /v1/runs/{id}/approvals/{call_id} with
// {decision, reason?}.
func (g *Gateway) approve(w http.ResponseWriter, r *http.Request) {
	var req bus.ApproveRequest
	if herr := g.decode(w, r, &req, "approval", exampleApprove); herr != nil {
		g.fail(w, r, herr)
		return
	}
	callID := r.PathValue("call_id")
	if req.CallID != "" && req.CallID != callID {
		g.fail(w, r, invalidRequest(http.StatusBadRequest,
			fmt.Sprintf("call_id %q in the body differs from %q in the path", req.CallID, callID), "leave call_id out of the body"))
		return
	}
	req.CallID = callID
	rep, err := g.cfg.API.Approve(r.Context(), r.PathValue("id"), &req)
	if err != nil {
		err = withHint(err, "send "+exampleApprove)
	}
	g.reply(w, r, http.StatusOK, rep, err)
}

// cancel handles POST /v1/runs/{id}/cancel with {reason?} (or no body).
func (g *Gateway) cancel(w http.ResponseWriter, r *http.Request) {
	var req bus.CancelRequest
	if herr := g.decode(w, r, &req, "cancel request", `{"reason": "not needed any more"}`); herr != nil {
		g.fail(w, r, herr)
		return
	}
	rep, err := g.cfg.API.Cancel(r.Context(), r.PathValue("id"), &req)
	g.reply(w, r, http.StatusOK, rep, err)
}

// inject handles POST /v1/runs/{id}/messages with {content, key?} → {token};
// a repeat with the same key answers the first token and stores nothing.
func (g *Gateway) inject(w http.ResponseWriter, r *http.Request) {
	var req bus.InjectRequest
	if herr := g.decode(w, r, &req, "message", exampleInject); herr != nil {
		g.fail(w, r, herr)
		return
	}
	rep, err := g.cfg.API.Inject(r.Context(), r.PathValue("id"), &req)
	if err != nil {
		err = withHint(err, "send "+exampleInject)
	}
	g.reply(w, r, http.StatusOK, rep, err)
}

// uninject handles DELETE /v1/runs/{id}/messages/{token} → {removed}.
func (g *Gateway) uninject(w http.ResponseWriter, r *http.Request) {
	rep, err := g.cfg.API.Uninject(r.Context(), r.PathValue("id"), &bus.UninjectRequest{Token: r.PathValue("token")})
	g.reply(w, r, http.StatusOK, rep, err)
}

// session handles GET /v1/sessions/{id}.
func (g *Gateway) session(w http.ResponseWriter, r *http.Request) {
	rep, err := g.cfg.API.Session(r.Context(), r.PathValue("id"))
	g.reply(w, r, http.StatusOK, rep, err)
}

// rewind handles POST /v1/sessions/{id}/rewind with {keep_entries}. The
// field is required: a forgotten body must not empty a session.
func (g *Gateway) rewind(w http.ResponseWriter, r *http.Request) {
	var body struct {
		KeepEntries *int `json:"keep_entries"`
	}
	if herr := g.decode(w, r, &body, "rewind request", `{"keep_entries": 4}`); herr != nil {
		g.fail(w, r, herr)
		return
	}
	if body.KeepEntries == nil {
		g.fail(w, r, &bus.FieldError{Field: "keep_entries", Reason: "is required (0 empties the session)"})
		return
	}
	rep, err := g.cfg.API.Rewind(r.Context(), r.PathValue("id"), &bus.RewindRequest{KeepEntries: *body.KeepEntries})
	g.reply(w, r, http.StatusOK, rep, err)
}

// workers handles GET /v1/workers: the live workers of the fleet.
func (g *Gateway) workers(w http.ResponseWriter, r *http.Request) {
	rep, err := g.cfg.API.Workers(r.Context())
	g.reply(w, r, http.StatusOK, rep, err)
}

// agents handles GET /v1/agents: the agents the live fleet serves.
func (g *Gateway) agents(w http.ResponseWriter, r *http.Request) {
	rep, err := g.cfg.API.FleetAgents(r.Context())
	g.reply(w, r, http.StatusOK, rep, err)
}

// decode reads and decodes a control request's body into v.
func (g *Gateway) decode(w http.ResponseWriter, r *http.Request, v any, what, example string) *httpError {
	body, herr := g.readBody(w, r)
	if herr != nil {
		return herr
	}
	return decodeBody(r, body, v, what, example)
}
