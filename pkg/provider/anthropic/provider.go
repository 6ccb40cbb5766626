package anthropic

import (
	"context"
	"net/http"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/provider/internal/classify"
	"github.com/lovia-fleet/lovia/pkg/provider/internal/watchdog"
	"github.com/lovia-fleet/lovia/pkg/provider/internal/window"
)

// Provider streams messages from one model of the Anthropic Messages API
// or a compatible host. It implements [loop.Provider] and
// [loop.ContextWindowDiscoverer] and is safe for concurrent use. Build it
// with [New].
type Provider struct {
	cfg    Config
	ep     classify.Endpoint
	msgs   sdk.MessageService
	models sdk.ModelService

	window window.Memo // discovered and rejected context windows
}

var (
	_ loop.Provider                = (*Provider)(nil)
	_ loop.ContextWindowDiscoverer = (*Provider)(nil)
)

// New validates cfg (after [Config.WithDefaults]) and returns the provider.
// It makes no network call. The SDK's own retries are off: the loop's retry
// policy is the only one.
func New(cfg Config) (*Provider, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, &loop.UserError{Message: err.Error(), Hint: "fix the Anthropic adapter's Config (or ANTHROPIC_BASE_URL)", Cause: err}
	}
	// The services are built without the SDK client so that nothing is read
	// from the environment: credentials and addresses come from Config.
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		option.WithHTTPClient(cfg.HTTPClient),
		option.WithMaxRetries(0),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey), option.WithHeader("x-api-key", cfg.APIKey))
	}
	for k, v := range cfg.Headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	return &Provider{
		cfg: cfg,
		ep: classify.Endpoint{
			Vendor:     Name,
			Model:      cfg.Model,
			BaseURL:    cfg.BaseURL,
			KeyEnv:     "ANTHROPIC_API_KEY",
			BaseURLEnv: "ANTHROPIC_BASE_URL",
			HasKey:     cfg.APIKey != "",
			Now:        cfg.Now,
		},
		msgs:   sdk.NewMessageService(opts...),
		models: sdk.NewModelService(opts...),
	}, nil
}

// Config returns the provider's configuration, defaults filled in.
func (p *Provider) Config() Config { return p.cfg }

// Info names the adapter, model and endpoint and states what it supports.
func (p *Provider) Info() loop.ProviderInfo {
	return loop.ProviderInfo{
		Name:             Name,
		Model:            p.cfg.Model,
		Endpoint:         p.cfg.BaseURL,
		NativeJSONSchema: *p.cfg.NativeJSONSchema,
		Vision:           true,
	}
}

// Stream sends req to "/v1/messages" with "stream": true and calls emit for
// every delta, in order, from the calling goroutine: text, thinking (as
// reasoning deltas, then one reasoning entry per thinking block with its
// signature, or with the redacted data), tool-use fragments keyed by the
// content block's index, then the usage and the finish reason. It returns
// nil once "message_stop" arrived, the error emit returned, the caller's
// context error, or a *loop.ProviderError / *loop.ContextOverflowError
// (see the package documentation).
func (p *Provider) Stream(ctx context.Context, req *loop.ModelRequest, emit func(loop.Delta) error) error {
	if !p.ep.HasKey && isOfficial(p.cfg.BaseURL) {
		return p.ep.MissingKey()
	}
	params, opts, err := p.request(req)
	if err != nil {
		return &loop.ProviderError{
			Message:   "anthropic: cannot encode the request: " + err.Error(),
			Hint:      "a tool schema, the output schema or a provider option is not valid JSON",
			Vendor:    Name,
			Model:     p.cfg.Model,
			Retryable: loop.NotRetryable,
			Cause:     err,
		}
	}
	callCtx, call := watchdog.Start(ctx, p.cfg.Timeout, p.cfg.IdleTimeout)
	defer call.Stop()

	var resp *http.Response
	opts = append(opts, option.WithResponseInto(&resp))
	stream := p.msgs.NewStreaming(callCtx, params, opts...)
	defer stream.Close()

	t := newTurn(p, emit)
	for !t.stopped {
		call.Touch()
		if !stream.Next() {
			break
		}
		if err := t.event(stream.Current()); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := stream.Err(); err != nil && !t.stopped {
		return p.overflowSeen(p.failure(ctx, call, resp, t.started, err))
	}
	if !t.stopped {
		return p.ep.Truncated(nil)
	}
	return t.end()
}

// overflowSeen remembers the window an overflow rejection named, so that
// DiscoverContextWindow never reports more than the endpoint accepts.
func (p *Provider) overflowSeen(err error) error { return p.window.Observe(err) }
