package toolsvc

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/trace"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Defaults of [Config] and [Dedupe].
const (
	DefaultPrefix  = "lovia"
	DefaultVersion = "0.0.1"
	DefaultWindow  = 24 * time.Hour
	// DefaultLease is how long a call's claim holds without renewal.
	DefaultLease = 15 * time.Second
	// DefaultConcurrency is how many calls one instance runs at once.
	DefaultConcurrency = 64
)

// Config configures a tool [Service].
type Config struct {
	// Conn is the NATS connection (required).
	Conn *nats.Conn
	// Prefix is the fleet's subject prefix (default "lovia").
	Prefix string
	// Name is the service name, 1-64 characters of [A-Za-z0-9_-]
	// (required). Agents call its tools as <Name>__<tool>.
	Name string
	// Version is the service's semantic version (default 0.0.1).
	Version string
	// Description describes the service in `nats micro info`.
	Description string
	// Tools are the tools the service serves, one endpoint each
	// (required, at least one).
	Tools []*loop.Tool
	// Dedupe keeps each call's reply by its Lovia-Run-Id and
	// Lovia-Call-Id, so a call made again (by a run's new owner after its
	// worker died) is answered from the store instead of running twice.
	// A call without both headers is not deduplicated. Nil: no dedupe.
	Dedupe *Dedupe
	// Concurrency is how many calls the instance runs at once (default
	// 64); further calls wait in the endpoint's subscription.
	Concurrency int
	// Logger receives call failures (default: discard).
	Logger *slog.Logger
	// Tracing opens a "toolsvc_serve" span per call, continuing the trace
	// the request's traceparent header carries (docs/protocol.md#trace-context).
	// Default: noop.
	Tracing trace.TracerProvider
}

// Dedupe configures the call-id store of a service.
type Dedupe struct {
	// Bucket is the JetStream KV bucket (default <prefix>_tool_calls, the
	// prefix lower-cased as for the fleet's buckets).
	Bucket string
	// Window is how long a reply is kept (default 24h): a call made
	// again after it runs again.
	Window time.Duration
	// Lease is how long a running call's claim holds without renewal
	// (default 15s); the instance running it renews it every third of the
	// lease. A call made again while it runs waits for its reply; once the
	// claim is not renewed for a lease (the instance running it died, or
	// was cut off from NATS that long) another instance runs it.
	Lease time.Duration
	// Replicas of the bucket when created (default 1).
	Replicas int
}

func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.Version == "" {
		c.Version = DefaultVersion
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultConcurrency
	}
	if d := c.Dedupe; d != nil {
		dd := *d
		if names, err := bus.NewNames(c.Prefix); dd.Bucket == "" && err == nil {
			dd.Bucket = names.ToolCallsBucket()
		}
		if dd.Window <= 0 {
			dd.Window = DefaultWindow
		}
		if dd.Lease <= 0 {
			dd.Lease = DefaultLease
		}
		c.Dedupe = &dd
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Conn == nil:
		return errors.New("toolsvc: Config.Conn is required")
	case len(c.Tools) == 0:
		return errors.New("toolsvc: Config.Tools is empty: serve at least one tool")
	}
	if _, err := Subject(c.Prefix, c.Name, "x"); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, t := range c.Tools {
		if t == nil || t.Func == nil {
			return errors.New("toolsvc: Config.Tools holds a nil tool or one without Func")
		}
		if _, err := Subject(c.Prefix, c.Name, t.Name); err != nil {
			return err
		}
		if seen[t.Name] {
			return fmt.Errorf("toolsvc: tool %q is served twice", t.Name)
		}
		seen[t.Name] = true
	}
	return nil
}

// Service serves tools as a NATS micro service: `nats micro ls` and
// `nats micro info <name>` show it, each tool is an endpoint on
// <prefix>.tools.<service>.<tool> in the default queue group (instances
// of one service share the calls), with the tool's description and JSON
// Schema in the endpoint metadata. Calls run concurrently (up to Concurrency), each in its own
// goroutine, which Stop waits for.
type Service struct {
	cfg   Config
	kv    jetstream.KeyValue
	slots chan struct{}

	mu      sync.Mutex
	svc     micro.Service
	calls   sync.WaitGroup
	ctx     context.Context
	cancel  context.CancelFunc
	stopped bool
}

// New validates cfg; [Service.Start] serves.
func New(cfg Config) (*Service, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Service{cfg: cfg, slots: make(chan struct{}, cfg.Concurrency)}, nil
}

// Start opens the dedupe bucket (creating it when missing) and adds the
// micro service with one endpoint per tool.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.svc != nil || s.stopped {
		return errors.New("toolsvc: Service.Start called twice")
	}
	if d := s.cfg.Dedupe; d != nil {
		js, err := jetstream.New(s.cfg.Conn)
		if err != nil {
			return fmt.Errorf("toolsvc: %w", err)
		}
		kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: d.Bucket, TTL: d.Window, Replicas: max(d.Replicas, 1),
			Description: "lovia tool service replies by call id",
		})
		if err != nil {
			return fmt.Errorf("toolsvc: dedupe bucket %s: %w%s", d.Bucket, err, noAnswerHint(err, d.Bucket))
		}
		s.kv = kv
	}
	svc, err := micro.AddService(s.cfg.Conn, micro.Config{Name: s.cfg.Name, Version: s.cfg.Version, Description: s.cfg.Description})
	if err != nil {
		return fmt.Errorf("toolsvc: service %s: %w", s.cfg.Name, err)
	}
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	for _, t := range s.cfg.Tools {
		subject, _ := Subject(s.cfg.Prefix, s.cfg.Name, t.Name)
		meta := map[string]string{MetaDescription: t.Description, MetaSchema: string(t.Schema().Parameters)}
		if err := svc.AddEndpoint(t.Name, s.handler(t), micro.WithEndpointSubject(subject), micro.WithEndpointMetadata(meta)); err != nil {
			_ = svc.Stop()
			s.cancel()
			return fmt.Errorf("toolsvc: endpoint %s: %w", subject, err)
		}
	}
	s.svc = svc
	return nil
}

// noAnswerHint says what to check when JetStream did not answer: on a
// secured server a refused publish gets no reply, only a timeout.
func noAnswerHint(err error, bucket string) string {
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
		return ""
	}
	return fmt.Sprintf(" (JetStream did not answer: check that the server has JetStream enabled and that this user may use the JetStream API of KV_%s and publish to $KV.%s.>; a refused permission shows as a Violation in the server log)", bucket, bucket)
}

// Stop stops taking calls, lets the calls in flight answer (or ctx end,
// which cancels them) and removes the service.
func (s *Service) Stop(ctx context.Context) error {
	s.mu.Lock()
	svc := s.svc
	s.svc, s.stopped = nil, true
	s.mu.Unlock()
	if svc == nil {
		return nil
	}
	err := svc.Stop()
	done := make(chan struct{})
	go func() { s.calls.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.cancel()
		<-done
	}
	s.cancel()
	return err
}

// Info is the service's micro info (its id distinguishes instances).
func (s *Service) Info() micro.Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.svc == nil {
		return micro.Info{}
	}
	return s.svc.Info()
}

func (s *Service) handler(t *loop.Tool) micro.HandlerFunc {
	return func(req micro.Request) {
		s.mu.Lock()
		if s.svc == nil && s.stopped {
			s.mu.Unlock()
			_ = req.Error(CodeUnavailable, "the tool service is stopping", nil)
			return
		}
		s.calls.Add(1)
		s.mu.Unlock()
		s.slots <- struct{}{} // at most Concurrency calls at once
		go func() {
			defer func() { <-s.slots; s.calls.Done() }()
			s.serve(t, req)
		}()
	}
}

func (s *Service) serve(t *loop.Tool, req micro.Request) {
	ctx := s.ctx
	if t.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.Timeout)
		defer cancel()
	}
	h := req.Headers()
	call := Call{RunID: h.Get(HeaderRunID), CallID: h.Get(HeaderCallID), Agent: h.Get(HeaderAgent)}
	ctx, span := s.startServe(ctx, t, req, call.CallID) // trace.go
	var rec record
	if s.kv != nil && call.RunID != "" && call.CallID != "" {
		rec = s.dedupe(ctx, t, call, req.Data())
	} else {
		rec = run(ctx, t, req.Data())
	}
	endServe(span, rec)
	s.respond(req, rec)
}

// respond publishes the reply to the request's reply subject itself: the
// micro library reads a request's reply state (for its stats) as the
// handler returns, and the handler returns before the call has run, so
// answering through req from the call's goroutine would race with it.
// An error reply carries the micro error headers, its description on one
// line (a line break would end the header block).
func (s *Service) respond(req micro.Request, rec record) {
	if req.Reply() == "" {
		return // published without a reply subject: nobody waits
	}
	msg := &nats.Msg{Subject: req.Reply(), Data: rec.Body, Header: nats.Header{}}
	if rec.Code != "" {
		msg.Header.Set(micro.ErrorHeader, oneLine(rec.Description))
		msg.Header.Set(micro.ErrorCodeHeader, rec.Code)
	}
	if err := s.cfg.Conn.PublishMsg(msg); err != nil {
		s.cfg.Logger.Warn("tool service reply failed", "subject", req.Subject(), "error", err)
	}
}

// oneLine replaces the line breaks of a header value with spaces.
func oneLine(v string) string {
	return strings.Join(strings.FieldsFunc(v, func(r rune) bool { return r == '\r' || r == '\n' }), " ")
}

// run calls the tool and turns its return into the reply: strings as
// they are, other values as JSON; errors as error replies.
func run(ctx context.Context, t *loop.Tool, args []byte) (rec record) {
	defer func() {
		if p := recover(); p != nil {
			rec = record{Done: true, Code: CodeToolError, Description: fmt.Sprintf("tool %s panicked: %v", t.Name, p)}
		}
	}()
	v, err := t.Func(ctx, nil, json.RawMessage(args))
	if err != nil {
		code := CodeToolError
		if errors.Is(err, loop.ErrInvalidToolArgs) {
			code = CodeInvalidArguments
		}
		return record{Done: true, Code: code, Description: err.Error()}
	}
	switch x := v.(type) {
	case string:
		return record{Done: true, Body: []byte(x)}
	case []byte:
		return record{Done: true, Body: []byte(base64.StdEncoding.EncodeToString(x))}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return record{Done: true, Code: CodeToolError, Description: fmt.Sprintf("tool %s result cannot be encoded as JSON: %v", t.Name, err)}
	}
	return record{Done: true, Body: b}
}
