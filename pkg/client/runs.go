package client

import (
	"context"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// ListRuns lists runs from the fleet's run index, newest first: the page
// req asks for (its filters, limit and cursor) and the counts by status
// (docs/protocol.md#listing-runs). Pass the reply's NextCursor as the next
// request's Cursor for the page after.
func (c *Client) ListRuns(ctx context.Context, req *bus.RunsListRequest) (*bus.RunsListReply, error) {
	if req == nil {
		req = &bus.RunsListRequest{}
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	var rep bus.RunsListReply
	if err := c.request(ctx, c.names.RunsList(), req, &rep, true); err != nil {
		return nil, err
	}
	return &rep, nil
}

// DescribeRun describes a run: its status, timing, history (claims,
// resumes, parks, wakes…), what it awaits, its parent and children.
func (c *Client) DescribeRun(ctx context.Context, runID string) (*bus.RunDescription, error) {
	subj, err := c.runSubject(runID, bus.OpDescribe)
	if err != nil {
		return nil, err
	}
	var rep bus.RunDescription
	if err := c.request(ctx, subj, struct{}{}, &rep, true); err != nil {
		return nil, err
	}
	return &rep, nil
}
