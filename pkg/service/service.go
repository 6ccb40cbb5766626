package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/lovia-fleet/lovia/internal/gopool"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/schedule"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// Version is the service version reported to `nats micro`.
const Version = "0.1.0"

// MaxConcurrentRequests is how many requests a Service serves at once.
// A micro endpoint delivers its requests one after another; served in that
// order, each submit would wait for the previous one's two round trips to
// JetStream (the record's create and the request's publish), which bounds
// a service at a few thousand submits a second however many clients send
// them. A request beyond the limit waits in its endpoint's subscription.
const MaxConcurrentRequests = 256

// Service serves an API as the `lovia` micro service.
type Service struct {
	api *API
	mu  sync.Mutex
	svc micro.Service
	// slots holds one token per request being served (MaxConcurrentRequests).
	slots chan struct{}
	// pool runs the requests, on goroutines kept between them.
	pool *gopool.Pool
	// queues holds, per run, the requests about it that wait for the one
	// being served (see dispatch).
	qmu    sync.Mutex
	queues map[string]*runQueue
	// serving, when set (by tests), is called as each request starts.
	serving func(subject string)
	// keeper fires the schedule slots a crashed server missed (schedule.go).
	keeper *schedule.Keeper
	// reaper removes the keys of runs whose record expired (retention.go).
	reaper *store.Reaper
}

// New builds a Service; Start registers it.
func New(api *API) *Service {
	return &Service{api: api, slots: make(chan struct{}, MaxConcurrentRequests), pool: gopool.New(10 * time.Second),
		queues: map[string]*runQueue{}}
}

// Start registers the endpoints in the service's queue group.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.svc != nil {
		return errors.New("service: Start called twice")
	}
	n := s.api.names
	svc, err := micro.AddService(s.api.cfg.Conn, micro.Config{
		Name:        n.ServiceName(),
		Version:     Version,
		Description: "Lovia Fleet control API (docs/protocol.md)",
	})
	if err != nil {
		return err
	}
	api := n.Prefix() + ".api"
	add := func(name, subject string, h func(context.Context, micro.Request) (any, error)) error {
		return svc.AddEndpoint(name, micro.HandlerFunc(func(r micro.Request) { s.dispatch(r, h) }), micro.WithEndpointSubject(subject))
	}
	var errs []error
	errs = append(errs,
		add("submit", n.APISubmit(), s.submit),
		add("status", api+".run.*.status", s.status),
		add("approve", api+".run.*.approve", s.approve),
		add("cancel", api+".run.*.cancel", s.cancel),
		add("inject", api+".run.*.inject", s.inject),
		add("uninject", api+".run.*.uninject", s.uninject),
		add("session_get", api+".session.*.get", s.session),
		add("session_rewind", api+".session.*.rewind", s.rewind),
		add("session_handoff", api+".session.*.handoff", func(ctx context.Context, r micro.Request) (any, error) {
			req, err := decodeBody[bus.HandoffRequest](r)
			if err != nil {
				return nil, err
			}
			return s.api.Handoff(ctx, token(r.Subject(), 1), req)
		}),
	)
	errs = append(errs, add("agents", n.Agents(), s.agents), add("workers", n.Workers(), s.workers),
		add("registry_apply", n.RegistryAPI(bus.OpRegistryApply), func(ctx context.Context, r micro.Request) (any, error) {
			req, err := decodeBody[bus.RegistryApplyRequest](r)
			if err != nil {
				return nil, err
			}
			return s.api.RegistryApply(ctx, req)
		}),
		add("registry_list", n.RegistryAPI(bus.OpRegistryList), func(ctx context.Context, _ micro.Request) (any, error) {
			return s.api.RegistryList(ctx)
		}),
		add("registry_get", n.RegistryAPI(bus.OpRegistryGet), func(ctx context.Context, r micro.Request) (any, error) {
			req, err := decodeBody[bus.RegistryGetRequest](r)
			if err != nil {
				return nil, err
			}
			return s.api.RegistryGet(ctx, req)
		}),
		add("registry_history", n.RegistryAPI(bus.OpRegistryHistory), func(ctx context.Context, r micro.Request) (any, error) {
			req, err := decodeBody[bus.RegistryGetRequest](r)
			if err != nil {
				return nil, err
			}
			return s.api.RegistryHistory(ctx, req)
		}),
		add("registry_rm", n.RegistryAPI(bus.OpRegistryRemove), func(ctx context.Context, r micro.Request) (any, error) {
			req, err := decodeBody[bus.RegistryGetRequest](r)
			if err != nil {
				return nil, err
			}
			return s.api.RegistryRemove(ctx, req)
		}),
	)
	errs = append(errs, s.scheduleEndpoints(add)...) // schedule.go
	errs = append(errs, s.runsEndpoints(add)...)     // runslist.go
	errs = append(errs, s.sessionEndpoints(add)...)  // sessions.go
	if err := errors.Join(errs...); err != nil {
		_ = svc.Stop()
		return err
	}
	s.svc = svc
	s.startKeeper(ctx)
	s.startReaper(ctx)
	return nil
}

// Stop unregisters the service and waits, until ctx ends, for the requests
// in flight to be answered.
func (s *Service) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.svc == nil {
		return s.api.stopIndex(ctx)
	}
	err := errors.Join(s.svc.Stop(), s.stopKeeper(ctx), s.stopReaper(ctx))
	s.svc = nil
	if derr := s.drain(ctx); derr != nil {
		err = errors.Join(err, derr) // the pool's goroutines end when idle
	} else {
		s.pool.Close()
	}
	return errors.Join(err, s.api.stopIndex(ctx))
}

// dispatch serves r on a goroutine of its own, once a slot is free: the
// endpoint's next request need not wait for this one's round trips. The
// requests about one run (<prefix>.api.run.<id>.<op>) are served in the
// order they came, one at a time, as when every request was served in
// order: two injects a client sends without waiting for the first reply
// reach the run in that order.
func (s *Service) dispatch(r micro.Request, h func(context.Context, micro.Request) (any, error)) {
	s.slots <- struct{}{}
	job := func() {
		defer func() { <-s.slots }()
		s.serve(r, h)
	}
	runID, _, err := s.api.names.ParseRunAPI(r.Subject())
	if err != nil {
		s.pool.Go(job)
		return
	}
	s.qmu.Lock()
	if q, busy := s.queues[runID]; busy {
		q.pending = append(q.pending, job)
		s.qmu.Unlock()
		return
	}
	q := &runQueue{}
	s.queues[runID] = q
	s.qmu.Unlock()
	s.pool.Go(func() { s.serveInOrder(runID, q, job) })
}

// runQueue is the requests about one run waiting for the one being served.
type runQueue struct{ pending []func() }

// serveInOrder runs job, then the run's requests that came meanwhile.
func (s *Service) serveInOrder(runID string, q *runQueue, job func()) {
	for {
		job()
		s.qmu.Lock()
		if len(q.pending) == 0 {
			delete(s.queues, runID)
			s.qmu.Unlock()
			return
		}
		job = q.pending[0]
		q.pending = q.pending[1:]
		s.qmu.Unlock()
	}
}

// drain waits for every slot to be free: no request is being served.
func (s *Service) drain(ctx context.Context) error {
	held := 0
	defer func() {
		for range held {
			<-s.slots
		}
	}()
	for ; held < cap(s.slots); held++ {
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("service: stopped with %d requests still being served: %w", cap(s.slots)-held, ctx.Err())
		}
	}
	return nil
}

func headers(r micro.Request) nats.Header { return nats.Header(r.Headers()) }

// serve runs h and replies in the request's encoding. The reply is
// published on the connection, not through micro.Request's Respond or
// Error: those record their outcome in the request, which micro reads as
// soon as the endpoint's handler (dispatch) returns, while serve still
// runs. micro's endpoint stats therefore count requests but no errors.
func (s *Service) serve(r micro.Request, h func(context.Context, micro.Request) (any, error)) {
	if s.serving != nil {
		s.serving(r.Subject())
	}
	enc, err := bus.EncodingOf(headers(r), r.Data())
	if err != nil || len(r.Data()) == 0 {
		enc = bus.JSON
	}
	out, err := h(context.Background(), r)
	if err != nil {
		apiErr := bus.ErrorFor(err)
		if apiErr.Type == bus.TypeInternal {
			s.api.log.Warn("api request failed", "subject", r.Subject(), "error", err)
		}
		body, _ := bus.Marshal(enc, &bus.ErrorReply{Error: *apiErr})
		h := bus.ErrorHeaders(apiErr, enc)
		h.Set(micro.ErrorHeader, apiErr.Message)
		s.reply(r, h, body)
		return
	}
	body, err := bus.Marshal(enc, out)
	if err != nil {
		s.reply(r, nats.Header{micro.ErrorHeader: {"encoding the reply failed: " + err.Error()}, micro.ErrorCodeHeader: {"500"}}, nil)
		return
	}
	s.reply(r, nats.Header{bus.HeaderContentType: {enc.ContentType()}}, body)
}

// reply answers r, if it asked for an answer.
func (s *Service) reply(r micro.Request, h nats.Header, body []byte) {
	if r.Reply() == "" {
		return
	}
	if err := s.api.cfg.Conn.PublishMsg(&nats.Msg{Subject: r.Reply(), Header: h, Data: body}); err != nil {
		s.api.log.Warn("api reply not sent", "subject", r.Subject(), "error", err)
	}
}

// token returns the subject token at index i from the end (0 = last).
func token(subject string, fromEnd int) string {
	parts := strings.Split(subject, ".")
	if fromEnd >= len(parts) {
		return ""
	}
	return parts[len(parts)-1-fromEnd]
}

func decodeBody[T any, P interface {
	*T
	bus.Control
}](r micro.Request) (P, error) {
	v := P(new(T))
	if len(r.Data()) == 0 {
		return v, v.Validate()
	}
	if _, err := bus.DecodeRequest(headers(r), r.Data(), v); err != nil {
		return nil, err
	}
	return v, nil
}

func (s *Service) submit(ctx context.Context, r micro.Request) (any, error) {
	req, enc, err := bus.DecodeRunRequest(headers(r), r.Data())
	if err != nil {
		return nil, err
	}
	// A client's traceparent header makes the submit part of its trace.
	return s.api.Submit(bus.ExtractTrace(ctx, headers(r)), req, enc)
}

func (s *Service) status(ctx context.Context, r micro.Request) (any, error) {
	return s.api.Status(ctx, token(r.Subject(), 1))
}

func (s *Service) approve(ctx context.Context, r micro.Request) (any, error) {
	req, err := decodeBody[bus.ApproveRequest](r)
	if err != nil {
		return nil, err
	}
	return s.api.Approve(ctx, token(r.Subject(), 1), req)
}

func (s *Service) cancel(ctx context.Context, r micro.Request) (any, error) {
	req, err := decodeBody[bus.CancelRequest](r)
	if err != nil {
		return nil, err
	}
	return s.api.Cancel(ctx, token(r.Subject(), 1), req)
}

func (s *Service) inject(ctx context.Context, r micro.Request) (any, error) {
	req, err := decodeBody[bus.InjectRequest](r)
	if err != nil {
		return nil, err
	}
	return s.api.Inject(ctx, token(r.Subject(), 1), req)
}

func (s *Service) uninject(ctx context.Context, r micro.Request) (any, error) {
	req, err := decodeBody[bus.UninjectRequest](r)
	if err != nil {
		return nil, err
	}
	return s.api.Uninject(ctx, token(r.Subject(), 1), req)
}

func (s *Service) session(ctx context.Context, r micro.Request) (any, error) {
	return s.api.Session(ctx, token(r.Subject(), 1))
}

func (s *Service) rewind(ctx context.Context, r micro.Request) (any, error) {
	req, err := decodeBody[bus.RewindRequest](r)
	if err != nil {
		return nil, err
	}
	return s.api.Rewind(ctx, token(r.Subject(), 1), req)
}

func (s *Service) agents(ctx context.Context, _ micro.Request) (any, error) {
	return s.api.FleetAgents(ctx)
}

func (s *Service) workers(ctx context.Context, _ micro.Request) (any, error) {
	return s.api.Workers(ctx)
}
