package anthropic_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/provider/anthropic"
	"github.com/lovia-fleet/lovia/pkg/provider/internal/providertest"
)

// setup starts a fixture server answering with responses and a provider
// pointed at it; mutate adjusts the config before New.
func setup(t *testing.T, mutate func(*anthropic.Config), responses ...providertest.Response) (*anthropic.Provider, *providertest.Server) {
	t.Helper()
	srv := providertest.NewServer(t, responses...)
	cfg := anthropic.Config{
		Model:       "claude-sonnet-4-5",
		BaseURL:     srv.URL,
		APIKey:      "sk-ant-test",
		HTTPClient:  srv.Client(),
		IdleTimeout: 5 * time.Second,
		Timeout:     10 * time.Second,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := anthropic.New(cfg)
	require.NoError(t, err)
	return p, srv
}

func fixture(t *testing.T, name string) providertest.Response {
	return providertest.SSE(providertest.Fixture(t, name))
}

func streamOnce(t *testing.T, p *anthropic.Provider, req *loop.ModelRequest) (*providertest.Recorder, error) {
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

func ptr[T any](v T) *T { return &v }

func requireJSON(t *testing.T, want string, got any) {
	t.Helper()
	b, err := json.Marshal(got)
	require.NoError(t, err)
	require.JSONEq(t, want, string(b))
}
