package openai

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/provider/internal/classify"
	"github.com/lovia-fleet/lovia/pkg/provider/internal/watchdog"
	"github.com/lovia-fleet/lovia/pkg/provider/internal/window"
)

// Provider streams chat completions from one model of an OpenAI-compatible
// endpoint. It implements [loop.Provider], [loop.ContextWindowDiscoverer]
// and is safe for concurrent use. Build it with [New].
type Provider struct {
	cfg    Config
	ep     classify.Endpoint
	chat   oai.ChatCompletionService
	models oai.ModelService

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
		return nil, &loop.UserError{Message: err.Error(), Hint: "fix the OpenAI adapter's Config (or OPENAI_BASE_URL)", Cause: err}
	}
	// Options are explicit so that nothing is read from the environment:
	// credentials and addresses come from Config only.
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		option.WithAPIKey(cfg.APIKey),
		option.WithHTTPClient(cfg.HTTPClient),
		option.WithMaxRetries(0),
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
			KeyEnv:     "OPENAI_API_KEY",
			BaseURLEnv: "OPENAI_BASE_URL",
			HasKey:     cfg.APIKey != "",
			Now:        cfg.Now,
		},
		chat:   oai.NewChatCompletionService(opts...),
		models: oai.NewModelService(opts...),
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
		Vision:           *p.cfg.Vision,
	}
}

// Stream sends req to "/chat/completions" with "stream": true and calls emit
// for every delta, in order, from the calling goroutine: text, reasoning
// (from "reasoning_content" or "reasoning"), tool-call fragments by index,
// then the reasoning entry, the usage and the finish reason. It returns nil
// once the stream finished ("[DONE]" or a finish reason), the error emit
// returned, the caller's context error, or a *loop.ProviderError /
// *loop.ContextOverflowError (see the package documentation).
func (p *Provider) Stream(ctx context.Context, req *loop.ModelRequest, emit func(loop.Delta) error) error {
	if !p.ep.HasKey && isOfficial(p.cfg.BaseURL) {
		return p.ep.MissingKey()
	}
	params, opts, err := p.request(req)
	if err != nil {
		return &loop.ProviderError{
			Message:   "openai: cannot encode the request: " + err.Error(),
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
	opts = append(opts,
		option.WithHeader("Accept", "text/event-stream"),
		option.WithJSONSet("stream", true),
		option.WithResponseBodyInto(&resp),
	)
	if _, err := p.chat.New(callCtx, params, opts...); err != nil {
		return p.overflowSeen(p.callError(ctx, call, "the chat completion request", resp, err))
	}
	if resp == nil || resp.Body == nil {
		return p.ep.Truncated(nil)
	}
	// Closed, not drained: draining a stream the caller abandoned could
	// block until the idle limit.
	defer resp.Body.Close()

	t := newTurn(p, emit)
	media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch media {
	case "", "text/event-stream", "application/json":
	default:
		return p.notAStream(resp, media)
	}
	if media == "application/json" {
		// A server that ignores "stream": true answers with one completion.
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return p.streamError(ctx, call, err)
		}
		if err := t.completion(body); err != nil {
			return err
		}
		return t.end()
	}
	dec := ssestream.NewDecoder(resp)
	done := false
	for !done {
		call.Touch()
		if !dec.Next() {
			break
		}
		done, err = t.event(dec.Event().Data)
		if err != nil {
			return p.overflowSeen(err)
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if readErr := dec.Err(); (readErr != nil || !done) && !t.finished() {
		return p.streamError(ctx, call, readErr)
	}
	return t.end()
}

// notAStream is the error of a successful response that is neither an
// event stream nor a completion: usually a base URL that points at a web
// page rather than at the API.
func (p *Provider) notAStream(resp *http.Response, media string) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return &loop.ProviderError{
		Message:    fmt.Sprintf("openai: %s answered with %s, not a chat completion stream", p.cfg.BaseURL, media),
		Hint:       fmt.Sprintf("the base URL must be the API root that serves /chat/completions (e.g. http://localhost:11434/v1): fix %s", p.ep.BaseURLEnv),
		Vendor:     Name,
		Model:      p.cfg.Model,
		StatusCode: resp.StatusCode,
		Retryable:  loop.NotRetryable,
		Body:       string(body),
	}
}

// overflowSeen remembers the window an overflow rejection named, so that
// DiscoverContextWindow never reports more than the endpoint accepts.
func (p *Provider) overflowSeen(err error) error { return p.window.Observe(err) }
