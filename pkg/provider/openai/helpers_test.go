package openai_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/provider/internal/providertest"
	"github.com/lovia-fleet/lovia/pkg/provider/openai"
)

// setup starts a fixture server answering with responses and a provider
// pointed at it; mutate adjusts the config before New.
func setup(t *testing.T, mutate func(*openai.Config), responses ...providertest.Response) (*openai.Provider, *providertest.Server) {
	t.Helper()
	srv := providertest.NewServer(t, responses...)
	cfg := openai.Config{
		Model:       "gpt-4.1-mini",
		BaseURL:     srv.URL + "/v1",
		APIKey:      "sk-test",
		HTTPClient:  srv.Client(),
		IdleTimeout: 5 * time.Second,
		Timeout:     10 * time.Second,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := openai.New(cfg)
	require.NoError(t, err)
	return p, srv
}

func fixture(t *testing.T, name string) providertest.Response {
	return providertest.SSE(providertest.Fixture(t, name))
}

// streamOnce streams a one-message request and records the deltas.
func streamOnce(t *testing.T, p *openai.Provider, req *loop.ModelRequest) (*providertest.Recorder, error) {
	t.Helper()
	if req == nil {
		req = &loop.ModelRequest{Entries: []loop.Entry{loop.UserText("hi")}}
	}
	rec := &providertest.Recorder{}
	err := p.Stream(context.Background(), req, rec.Emit)
	return rec, err
}

func providerError(t *testing.T, err error) *loop.ProviderError {
	t.Helper()
	var pe *loop.ProviderError
	require.ErrorAs(t, err, &pe)
	return pe
}
