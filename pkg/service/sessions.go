package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/micro"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/runindex"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// sessionRunsShown is how many of a session's last runs a session reply
// gives the status, turns and usage of.
const sessionRunsShown = 200

// ListSessions answers <p>.api.sessions.list from the run index: the
// sessions of the runs it holds, the one with the newest run first.
func (a *API) ListSessions(ctx context.Context, req *bus.SessionsListRequest) (*bus.SessionsListReply, error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	if err := req.Validate(); err != nil {
		return nil, err
	}
	x, err := a.runIndex(ctx)
	if err != nil {
		return nil, err
	}
	page, err := x.Sessions(req.Agent, req.PageSize(), req.Cursor)
	if errors.Is(err, runindex.ErrBadCursor) {
		return nil, invalid("cursor", "is not a cursor a listing returned: pass next_cursor as it came, or none for the first page")
	}
	if err != nil {
		return nil, err
	}
	out := &bus.SessionsListReply{Sessions: make([]bus.SessionSummary, 0, len(page.Sessions)), NextCursor: page.Next}
	for _, s := range page.Sessions {
		out.Sessions = append(out.Sessions, bus.SessionSummary{SessionID: s.SessionID, Runs: s.Runs, LastRun: summaryOf(&s.Last, nil)})
	}
	return out, nil
}

// ExportSession answers <p>.api.session.<id>.export: every entry of the
// session, in order, with the run that added it.
func (a *API) ExportSession(ctx context.Context, sessionID string) (*bus.SessionExportReply, error) {
	rep, err := a.Session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	out := &bus.SessionExportReply{SessionID: sessionID, Lines: []bus.SessionExportLine{}}
	for _, seg := range rep.Segments {
		for _, e := range seg.Entries {
			out.Lines = append(out.Lines, bus.SessionExportLine{RunID: seg.RunID, Entry: e})
		}
	}
	return out, nil
}

// DeleteSession answers <p>.api.session.<id>.delete: every segment of the
// session goes. A session with a live run is refused (SessionBusy): cancel
// the run first.
func (a *API) DeleteSession(ctx context.Context, sessionID string) (*bus.SessionDeleteReply, error) {
	if err := bus.ValidateID("session_id", sessionID); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	sess := a.cfg.Store.Session()
	if le, err := sess.Live(ctx, sessionID); err == nil {
		e, gerr := a.cfg.Store.Runs().Get(ctx, le.Slot.RunID)
		if gerr == nil && !a.settled(ctx, e).Status.Ended() || len(le.Slot.Queue) > 0 {
			return nil, &bus.APIError{Type: bus.TypeSessionBusy,
				Message: fmt.Sprintf("session %s has a live run, %s", sessionID, le.Slot.RunID),
				Hint:    fmt.Sprintf("cancel it first (lovia cancel %s), then delete the session", le.Slot.RunID)}
		}
	} else if !errors.Is(err, store.ErrRunNotFound) {
		return nil, err
	}
	segs, err := sess.Segments(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if len(segs) == 0 {
		if _, err := sess.Live(ctx, sessionID); errors.Is(err, store.ErrRunNotFound) {
			return nil, &bus.APIError{Type: bus.TypeNotFound, Message: "session " + sessionID + " not found",
				Hint: "check the id; lovia session ls lists the sessions"}
		}
	}
	if err := sess.Clear(ctx, sessionID); err != nil {
		return nil, err
	}
	a.log.Info("session deleted", "session_id", sessionID, "segments", len(segs))
	return &bus.SessionDeleteReply{Deleted: true}, nil
}

// TrimSession answers <p>.api.session.<id>.trim: the tool results of all
// but the session's last keep_runs runs are cut to keep_chars characters.
func (a *API) TrimSession(ctx context.Context, sessionID string, req *bus.SessionTrimRequest) (*bus.SessionTrimReply, error) {
	if err := bus.ValidateID("session_id", sessionID); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	if _, err := a.Session(ctx, sessionID); err != nil {
		return nil, err
	}
	n, err := a.cfg.Store.Session().TrimToolResults(ctx, sessionID, req.KeepChars, req.KeepRuns)
	if err != nil {
		return nil, err
	}
	return &bus.SessionTrimReply{Trimmed: n}, nil
}

// sessionEndpoints are the session operations beyond get, rewind and
// handoff.
func (s *Service) sessionEndpoints(add func(name, subject string, h func(context.Context, micro.Request) (any, error)) error) []error {
	n := s.api.names
	return []error{
		add("sessions_list", n.SessionsList(), func(ctx context.Context, r micro.Request) (any, error) {
			req, err := decodeBody[bus.SessionsListRequest](r)
			if err != nil {
				return nil, err
			}
			return s.api.ListSessions(ctx, req)
		}),
		add("session_export", n.SessionAPIWildcard(bus.OpSessionExport), func(ctx context.Context, r micro.Request) (any, error) {
			return s.api.ExportSession(ctx, token(r.Subject(), 1))
		}),
		add("session_delete", n.SessionAPIWildcard(bus.OpSessionDelete), func(ctx context.Context, r micro.Request) (any, error) {
			return s.api.DeleteSession(ctx, token(r.Subject(), 1))
		}),
		add("session_trim", n.SessionAPIWildcard(bus.OpSessionTrim), func(ctx context.Context, r micro.Request) (any, error) {
			req, err := decodeBody[bus.SessionTrimRequest](r)
			if err != nil {
				return nil, err
			}
			return s.api.TrimSession(ctx, token(r.Subject(), 1), req)
		}),
	}
}
