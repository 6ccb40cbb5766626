package anthropic

import (
	"context"
	"errors"
	"net/http"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/lovia-fleet/lovia/pkg/provider/internal/watchdog"
)

// DiscoverContextWindow returns the model's context window in tokens:
// Config.ContextWindow when set, else the "max_input_tokens" the models API
// ("GET /v1/models/{model}") publishes (0 when the host has no such API or
// does not know the model), never more than a window an overflow rejection
// named. A successful lookup is memoized for the provider's life, which is
// one endpoint and one model; a failed one is retried on the next call.
func (p *Provider) DiscoverContextWindow(ctx context.Context) (int, error) {
	return p.window.Get(ctx, p.cfg.ContextWindow, p.modelWindow)
}

func (p *Provider) modelWindow(ctx context.Context) (int, error) {
	if !p.ep.HasKey && isOfficial(p.cfg.BaseURL) {
		return 0, p.ep.MissingKey()
	}
	parent := ctx
	ctx, call := watchdog.Start(ctx, p.cfg.DiscoveryTimeout, 0)
	defer call.Stop()
	info, err := p.models.Get(ctx, p.cfg.Model, sdk.ModelGetParams{})
	if err != nil {
		var apiErr *sdk.Error
		if errors.As(err, &apiErr) && (apiErr.StatusCode == http.StatusNotFound || apiErr.StatusCode == http.StatusMethodNotAllowed) {
			return 0, nil // no models API, or an alias it does not list
		}
		return 0, p.failure(parent, call, nil, false, err)
	}
	return int(info.MaxInputTokens), nil
}
