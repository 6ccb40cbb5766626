package worker

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"

	"github.com/nats-io/nats.go"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// handoff asks the API for the session's next run once one of its runs
// has ended (<p>.api.session.<id>.handoff): the first request queued
// behind the run, or the messages it left in its mailbox, start, or the
// session becomes idle. A failed ask loses nothing: the session's slot
// still names the ended run, and the next submit to the session does the
// handoff.
func (w *Worker) handoff(ctx context.Context, log *slog.Logger, sessionID, runID, agent string, completed bool) {
	if sessionID == "" {
		return
	}
	subject, err := w.names.SessionAPI(sessionID, bus.OpSessionHandoff)
	if err != nil {
		return
	}
	status := bus.StateFailed
	if completed {
		status = bus.StateCompleted
	}
	body, err := json.Marshal(&bus.HandoffRequest{RunID: runID, Status: status, Agent: agent})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.StoreTimeout)
	defer cancel()
	msg, err := w.cfg.Conn.RequestWithContext(ctx, subject, body)
	if errors.Is(err, nats.ErrNoResponders) {
		log.Info("no API instance to start the session's next run; the session's next submit does", "session_id", sessionID)
		return
	}
	if err != nil {
		log.Warn("asking for the session's next run failed; the session's next submit starts it", "session_id", sessionID, "error", err)
		return
	}
	var reply struct {
		bus.HandoffReply
		Error *bus.APIError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &reply); err != nil || reply.Error != nil {
		log.Warn("the session's handoff was refused; the session's next submit retries it", "session_id", sessionID, "reply", string(msg.Data))
		return
	}
	if reply.NextRunID != "" {
		log.Info("session's next run started", "session_id", sessionID, "next_run_id", reply.NextRunID)
	}
}
