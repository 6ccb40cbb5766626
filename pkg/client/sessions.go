package client

import (
	"context"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// ListSessions lists the fleet's sessions (those of the runs its run index
// holds), the one with the newest run first, with each one's last run.
// Pass the reply's NextCursor as the next request's Cursor for the page
// after.
func (c *Client) ListSessions(ctx context.Context, req *bus.SessionsListRequest) (*bus.SessionsListReply, error) {
	if req == nil {
		req = &bus.SessionsListRequest{}
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	var rep bus.SessionsListReply
	if err := c.request(ctx, c.names.SessionsList(), req, &rep, true); err != nil {
		return nil, err
	}
	return &rep, nil
}

// ExportSession returns every entry of a session, in order, with the run
// that added it (NotFound for an unknown session).
func (c *Client) ExportSession(ctx context.Context, sessionID string) (*bus.SessionExportReply, error) {
	subj, err := c.names.SessionAPI(sessionID, bus.OpSessionExport)
	if err != nil {
		return nil, err
	}
	var rep bus.SessionExportReply
	if err := c.request(ctx, subj, struct{}{}, &rep, true); err != nil {
		return nil, err
	}
	return &rep, nil
}

// DeleteSession deletes a session's segments. A session with a live run
// is refused with SessionBusy: cancel the run first.
func (c *Client) DeleteSession(ctx context.Context, sessionID string) error {
	subj, err := c.names.SessionAPI(sessionID, bus.OpSessionDelete)
	if err != nil {
		return err
	}
	var rep bus.SessionDeleteReply
	return c.request(ctx, subj, struct{}{}, &rep, true)
}

// TrimSession cuts the tool results of all but the session's last keepRuns
// runs to keepChars characters, and returns how many it cut.
func (c *Client) TrimSession(ctx context.Context, sessionID string, keepChars, keepRuns int) (int, error) {
	subj, err := c.names.SessionAPI(sessionID, bus.OpSessionTrim)
	if err != nil {
		return 0, err
	}
	var rep bus.SessionTrimReply
	if err := c.request(ctx, subj, &bus.SessionTrimRequest{KeepChars: keepChars, KeepRuns: keepRuns}, &rep, false); err != nil {
		return 0, err
	}
	return rep.Trimmed, nil
}
