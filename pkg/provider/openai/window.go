package openai

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/openai/openai-go/v3/option"

	"github.com/lovia-fleet/lovia/pkg/provider/internal/watchdog"
)

// windowFields are the model-listing fields servers publish the context
// window in: vLLM and SGLang "max_model_len", OpenRouter and Together
// "context_length", others "context_window" or "max_context_length".
var windowFields = []string{"max_model_len", "context_length", "context_window", "max_context_length"}

// DiscoverContextWindow returns the model's context window in tokens:
// Config.ContextWindow when set, else what the endpoint's "/models" listing
// publishes for the model (0 when it publishes nothing, as the official API
// does), never more than a window an overflow rejection named. A successful
// lookup is memoized for the provider's life, which is one endpoint and one
// model; a failed one is retried on the next call.
func (p *Provider) DiscoverContextWindow(ctx context.Context) (int, error) {
	return p.window.Get(ctx, p.cfg.ContextWindow, p.listWindow)
}

func (p *Provider) listWindow(ctx context.Context) (int, error) {
	if !p.ep.HasKey && isOfficial(p.cfg.BaseURL) {
		return 0, p.ep.MissingKey()
	}
	parent := ctx
	ctx, call := watchdog.Start(ctx, p.cfg.DiscoveryTimeout, 0)
	defer call.Stop()
	var (
		body []byte
		resp *http.Response
	)
	_, err := p.models.List(ctx, option.WithResponseBodyInto(&body), option.WithResponseInto(&resp))
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			return 0, nil // no listing: the window is unknown
		}
		return 0, p.callError(parent, call, "the model listing", resp, err)
	}
	var list struct {
		Data []map[string]json.RawMessage `json:"data"`
	}
	if json.Unmarshal(body, &list) != nil {
		return 0, nil
	}
	for _, m := range list.Data {
		var id string
		if json.Unmarshal(m["id"], &id) != nil || id != p.cfg.Model {
			continue
		}
		for _, f := range windowFields {
			var n float64
			if raw, ok := m[f]; ok && json.Unmarshal(raw, &n) == nil && n > 0 {
				return int(n), nil
			}
		}
		return 0, nil
	}
	return 0, nil
}
