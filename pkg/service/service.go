package service

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// Version is the service version reported to `nats micro`.
const Version = "0.1.0"

// Service serves an API as the `lovia` micro service.
type Service struct {
	api *API
	mu  sync.Mutex
	svc micro.Service
}

// New builds a Service; Start registers it.
func New(api *API) *Service { return &Service{api: api} }

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
		return svc.AddEndpoint(name, micro.HandlerFunc(func(r micro.Request) { s.serve(r, h) }), micro.WithEndpointSubject(subject))
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
	if err := errors.Join(errs...); err != nil {
		_ = svc.Stop()
		return err
	}
	s.svc = svc
	return nil
}

// Stop unregisters the service; requests in flight finish.
func (s *Service) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.svc == nil {
		return s.api.stopIndex(ctx)
	}
	err := s.svc.Stop()
	s.svc = nil
	return errors.Join(err, s.api.stopIndex(ctx))
}

func headers(r micro.Request) nats.Header { return nats.Header(r.Headers()) }

// serve runs h and replies in the request's encoding.
func (s *Service) serve(r micro.Request, h func(context.Context, micro.Request) (any, error)) {
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
		_ = r.Error(h.Get(bus.HeaderServiceErrorCode), apiErr.Message, body, micro.WithHeaders(micro.Headers(h)))
		return
	}
	body, err := bus.Marshal(enc, out)
	if err != nil {
		_ = r.Error("500", "encoding the reply failed: "+err.Error(), nil)
		return
	}
	_ = r.Respond(body, micro.WithHeaders(micro.Headers{bus.HeaderContentType: []string{enc.ContentType()}}))
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
	if _, err := bus.DecodeControl(headers(r), r.Data(), v); err != nil {
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
