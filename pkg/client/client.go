// Package client is the Go SDK of Lovia Fleet: submit runs, tail their
// events, approve, cancel and steer them, and read sessions, over NATS.
//
//	c, _ := client.New(nc, client.Options{})
//	rep, _ := c.Submit(ctx, &bus.RunRequest{Agent: "demo", Input: bus.TextInput("What is 12*7?")})
//	tail, _ := c.Tail(ctx, rep.RunID, bus.FromStart())
//	for env, err := range tail.All(ctx) { … }
package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Options configures a Client.
type Options struct {
	// Prefix is the subject prefix. Default "lovia".
	Prefix string
	// Timeout bounds each request without a context deadline. Default 10s.
	Timeout time.Duration
	// Encoding of requests (and so of replies and, for submit, events).
	// Default JSON.
	Encoding bus.Encoding
}

// Client talks to a fleet. It is safe for concurrent use.
type Client struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	names  bus.Names
	opts   Options
	tailer *bus.Tailer
}

// New builds a Client on a connection.
func New(nc *nats.Conn, opts Options) (*Client, error) {
	if nc == nil {
		return nil, errors.New("client: a NATS connection is required")
	}
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Encoding == "" {
		opts.Encoding = bus.JSON
	}
	names, err := bus.NewNames(opts.Prefix)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	tailer, err := bus.NewTailer(js, bus.TailerConfig{Prefix: names.Prefix()})
	if err != nil {
		return nil, err
	}
	return &Client{nc: nc, js: js, names: names, opts: opts, tailer: tailer}, nil
}

// Names returns the subject names.
func (c *Client) Names() bus.Names { return c.names }

// minTry is the shortest wait for a reply before a read is sent again.
const minTry = time.Second

// request sends one API request and decodes its reply into out. A request
// that is safe to repeat with the same answer (submit with a run id, status,
// session, agents, approve: retry) and whose reply does not come is sent again: the
// process it reached may have died with it (a worker killed mid-request),
// and the next one reaches a live process. Each try waits for half the time
// left, the last (under 2*minTry left) for all of it. Other operations are
// sent once: when their reply is lost, their effect may have happened (read
// the run's status).
func (c *Client) request(ctx context.Context, subject string, body any, out bus.Control, retry bool) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(c.opts.Timeout)
	}
	data, err := bus.Marshal(c.opts.Encoding, body)
	if err != nil {
		return err
	}
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{bus.HeaderContentType: []string{c.opts.Encoding.ContentType()}}}
	bus.InjectTrace(ctx, msg.Header) // the caller's trace, if any (docs/protocol.md#trace-context)
	for {
		wait := time.Until(deadline)
		half := retry && wait >= 2*minTry
		if half {
			wait /= 2
		}
		rep, err := c.send(ctx, msg, wait)
		switch {
		case err == nil:
			return bus.DecodeReply(rep.Header, rep.Data, out)
		case errors.Is(err, nats.ErrNoResponders):
			return fmt.Errorf("%s: no worker or gateway is serving the lovia API (start `lovia worker` or `lovia dev`): %w", subject, err)
		case half && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
			continue // this try's time is up, not the caller's: send it again
		}
		return fmt.Errorf("%s: %w", subject, err)
	}
}

// send is one try of a request: msg, and its reply within wait (or until
// ctx ends). A try whose reply does not come in time fails with an error
// matching context.DeadlineExceeded.
func (c *Client) send(ctx context.Context, msg *nats.Msg, wait time.Duration) (*nats.Msg, error) {
	if wait <= 0 {
		return nil, context.DeadlineExceeded
	}
	if ctx.Done() == nil {
		// A context that cannot end (context.Background): the
		// connection's pooled timer bounds the wait, not a context of
		// its own (two timers and two contexts a request).
		rep, err := c.nc.RequestMsg(msg, wait)
		if errors.Is(err, nats.ErrTimeout) {
			err = fmt.Errorf("%w (%w)", context.DeadlineExceeded, err)
		}
		return rep, err
	}
	try, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return c.nc.RequestMsgWithContext(try, msg)
}

func (c *Client) runSubject(runID string, op bus.RunOp) (string, error) {
	return c.names.RunAPI(runID, op)
}

// Submit enqueues a run.
func (c *Client) Submit(ctx context.Context, req *bus.RunRequest) (*bus.SubmitReply, error) {
	if req.RunID == "" {
		// A new run: one the API would refuse (no input, say) is refused
		// here with the API's words, not under the run id named below,
		// which the caller never chose.
		if err := req.Validate(); err != nil {
			return nil, bus.ErrorFor(err)
		}
		// Name the run here, so that sending the request again (see
		// request) cannot start a second one.
		named := *req
		named.RunID = bus.NewRunID()
		req = &named
	}
	var rep bus.SubmitReply
	if err := c.request(ctx, c.names.APISubmit(), req, &rep, true); err != nil {
		return nil, err
	}
	return &rep, nil
}

// Status reads a run's status.
func (c *Client) Status(ctx context.Context, runID string) (*bus.StatusReply, error) {
	subj, err := c.runSubject(runID, bus.OpStatus)
	if err != nil {
		return nil, err
	}
	var rep bus.StatusReply
	if err := c.request(ctx, subj, struct{}{}, &rep, true); err != nil {
		return nil, err
	}
	return &rep, nil
}

// Approve decides a gated call.
func (c *Client) Approve(ctx context.Context, runID, callID string, d loop.Decision, reason string) (*bus.ApproveReply, error) {
	subj, err := c.runSubject(runID, bus.OpApprove)
	if err != nil {
		return nil, err
	}
	var rep bus.ApproveReply
	// Safe to send again: the API answers a repeat of the decision in
	// force as it answered the first (accepted).
	if err := c.request(ctx, subj, &bus.ApproveRequest{CallID: callID, Decision: d, Reason: reason}, &rep, true); err != nil {
		return nil, err
	}
	return &rep, nil
}

// Cancel asks a run to stop.
func (c *Client) Cancel(ctx context.Context, runID, reason string) (*bus.CancelReply, error) {
	subj, err := c.runSubject(runID, bus.OpCancel)
	if err != nil {
		return nil, err
	}
	var rep bus.CancelReply
	if err := c.request(ctx, subj, &bus.CancelRequest{Reason: reason}, &rep, false); err != nil {
		return nil, err
	}
	return &rep, nil
}

// Inject queues a steering message; it returns the token Uninject takes.
// With [bus.InjectKey] it is idempotent: a second inject with the key to
// the run stores nothing and returns the first one's token, so a retry
// after a timeout is safe.
func (c *Client) Inject(ctx context.Context, runID, content string, opts ...bus.InjectOption) (string, error) {
	subj, err := c.runSubject(runID, bus.OpInject)
	if err != nil {
		return "", err
	}
	req := &bus.InjectRequest{Content: content}
	for _, o := range opts {
		o(req)
	}
	var rep bus.InjectReply
	if err := c.request(ctx, subj, req, &rep, false); err != nil {
		return "", err
	}
	return rep.Token, nil
}

// Uninject withdraws a queued steering message.
func (c *Client) Uninject(ctx context.Context, runID, token string) (bool, error) {
	subj, err := c.runSubject(runID, bus.OpUninject)
	if err != nil {
		return false, err
	}
	var rep bus.UninjectReply
	if err := c.request(ctx, subj, &bus.UninjectRequest{Token: token}, &rep, false); err != nil {
		return false, err
	}
	return rep.Removed, nil
}

// Session reads a session's segments.
func (c *Client) Session(ctx context.Context, sessionID string) (*bus.SessionReply, error) {
	subj, err := c.names.SessionAPI(sessionID, bus.OpSessionGet)
	if err != nil {
		return nil, err
	}
	var rep bus.SessionReply
	if err := c.request(ctx, subj, struct{}{}, &rep, true); err != nil {
		return nil, err
	}
	return &rep, nil
}

// Rewind keeps the first keep entries of a session.
func (c *Client) Rewind(ctx context.Context, sessionID string, keep int) (int, error) {
	subj, err := c.names.SessionAPI(sessionID, bus.OpRewind)
	if err != nil {
		return 0, err
	}
	var rep bus.RewindReply
	if err := c.request(ctx, subj, &bus.RewindRequest{KeepEntries: keep}, &rep, false); err != nil {
		return 0, err
	}
	return rep.Removed, nil
}

// Agents lists the agents the fleet serves.
func (c *Client) Agents(ctx context.Context) (*bus.AgentsReply, error) {
	var rep bus.AgentsReply
	if err := c.request(ctx, c.names.Agents(), struct{}{}, &rep, true); err != nil {
		return nil, err
	}
	return &rep, nil
}

// Workers lists the live workers of the fleet: the agents each serves,
// its runs in flight and its version.
func (c *Client) Workers(ctx context.Context) (*bus.WorkersReply, error) {
	var rep bus.WorkersReply
	if err := c.request(ctx, c.names.Workers(), struct{}{}, &rep, true); err != nil {
		return nil, err
	}
	return &rep, nil
}

// Tail follows a run's events (see bus.FromStart, bus.FromSeq, bus.Live).
func (c *Client) Tail(ctx context.Context, runID string, opts ...bus.TailOption) (*bus.Tail, error) {
	return c.tailer.Tail(ctx, runID, opts...)
}
