package service_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/service"
	"github.com/lovia-fleet/lovia/pkg/store"
	"github.com/lovia-fleet/lovia/pkg/tools"
)

// serveAPI starts a server, provisions it and serves the API on it; it
// returns a client connection.
func serveAPI(t *testing.T) *nats.Conn {
	t.Helper()
	ctx := t.Context()
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	nc, err := srv.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = bus.Provision(ctx, js, bus.ProvisionConfig{})
	require.NoError(t, err)
	st, err := store.Open(ctx, js, store.Config{})
	require.NoError(t, err)
	ts, err := tools.Builtin(tools.Config{Workspace: t.TempDir()})
	require.NoError(t, err)
	cat, err := catalog.Parse([]byte("agents:\n  - name: oracle\n    model: scripted\n    script:\n      - text: Forty-two.\n"), catalog.Options{Tools: ts})
	require.NoError(t, err)
	api, err := service.NewAPI(service.Config{Conn: nc, Store: st, Catalog: cat})
	require.NoError(t, err)
	svc := service.New(api)
	require.NoError(t, svc.Start(ctx))
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	return nc
}

// errorReply sends body to subject and decodes the error reply.
func errorReply(t *testing.T, nc *nats.Conn, subject, body string) bus.APIError {
	t.Helper()
	rep, err := nc.RequestWithContext(t.Context(), subject, []byte(body))
	require.NoError(t, err)
	require.NotEmpty(t, rep.Header.Get(bus.HeaderServiceErrorCode), "an error reply to %s %s, got %s", subject, body, rep.Data)
	var er bus.ErrorReply
	require.NoError(t, json.Unmarshal(rep.Data, &er), "%s", rep.Data)
	return er.Error
}

// TestSubmitRefusesBadInput: the API's submit refuses what the workers
// refuse, naming the field, and every error reply has a hint.
func TestSubmitRefusesBadInput(t *testing.T) {
	t.Parallel()
	nc := serveAPI(t)
	for _, tc := range []struct{ name, body, typ, text string }{
		{"missing input", `{"agent":"oracle"}`, bus.TypeInvalidRequest, "input: is required"},
		{"empty input", `{"agent":"oracle","input":""}`, bus.TypeInvalidRequest, "input: is empty"},
		{"unknown field", `{"agent":"oracle","inptu":"hi"}`, bus.TypeInvalidRequest, "unknown field inptu; known fields: agent, budget,"},
		{"a schema that is not one", `{"agent":"oracle","input":"hi","output_schema":"notaschema"}`, bus.TypeInvalidRequest, "output_schema: must be a JSON Schema object"},
		{"negative max_turns", `{"agent":"oracle","input":"hi","max_turns":-1}`, bus.TypeInvalidRequest, "max_turns: must not be negative"},
		{"wrong type", `{"agent":"oracle","input":"hi","max_turns":"ten"}`, bus.TypeInvalidRequest, "max_turns"},
		{"not a request", `hello`, bus.TypeInvalidRequest, "encoding"},
		{"unknown agent", `{"agent":"sphinx","input":"hi"}`, bus.TypeUnknownAgent, "sphinx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := errorReply(t, nc, "lovia.api.submit", tc.body)
			require.Equal(t, tc.typ, e.Type, e.Message)
			require.Contains(t, e.Message, tc.text)
			require.NotEmpty(t, e.Hint, "every error reply says what to do next")
		})
	}
	t.Run("other operations' errors have hints too", func(t *testing.T) {
		for _, subject := range []string{"lovia.api.run.ghost.status", "lovia.api.run.ghost.cancel"} {
			e := errorReply(t, nc, subject, "")
			require.NotEmpty(t, e.Hint, "%s: %+v", subject, e)
		}
	})
}

// TestSubmitWithoutInputNeedsAnExistingRun: a run id alone does not make a
// run: only the resubmission of a run the fleet has seen may omit its
// input (issue 25, item 4).
func TestSubmitWithoutInputNeedsAnExistingRun(t *testing.T) {
	t.Parallel()
	nc := serveAPI(t)
	for _, body := range []string{
		`{"agent":"oracle","run_id":"fresh-1"}`,
		`{"agent":"oracle","run_id":"fresh-2","input":[]}`,
	} {
		e := errorReply(t, nc, "lovia.api.submit", body)
		require.Equal(t, bus.TypeInvalidRequest, e.Type, body)
		require.Contains(t, e.Message, "input: is required: run fresh-", body)
		require.NotEmpty(t, e.Hint)
	}
	// The refused submits indexed no run.
	e := errorReply(t, nc, "lovia.api.run.fresh-1.status", "")
	require.Equal(t, bus.TypeNotFound, e.Type)

	// An existing run's resubmission may omit it.
	first, err := nc.RequestWithContext(t.Context(), "lovia.api.submit", []byte(`{"agent":"oracle","run_id":"known-1","input":"hi"}`))
	require.NoError(t, err)
	require.Empty(t, first.Header.Get(bus.HeaderServiceErrorCode), "%s", first.Data)
	again, err := nc.RequestWithContext(t.Context(), "lovia.api.submit", []byte(`{"agent":"oracle","run_id":"known-1"}`))
	require.NoError(t, err)
	require.Empty(t, again.Header.Get(bus.HeaderServiceErrorCode), "a resubmission without input is accepted: %s", again.Data)
	var sr bus.SubmitReply
	require.NoError(t, json.Unmarshal(again.Data, &sr))
	require.Equal(t, "known-1", sr.RunID)
}

// TestAgentsAlwaysHaveSchemas: every agent of lovia.api.agents carries its
// schemas, an empty list for one with no resolved tool (none, or tool
// services not up yet), as docs/protocol.md says (issue 25, item 10).
func TestAgentsAlwaysHaveSchemas(t *testing.T) {
	t.Parallel()
	nc := serveAPI(t)
	rep, err := nc.RequestWithContext(t.Context(), "lovia.api.agents", nil)
	require.NoError(t, err)
	var out struct {
		Agents []map[string]json.RawMessage `json:"agents"`
	}
	require.NoError(t, json.Unmarshal(rep.Data, &out), "%s", rep.Data)
	require.NotEmpty(t, out.Agents)
	for _, a := range out.Agents {
		for _, key := range []string{"name", "model", "tools", "handoffs", "schemas"} {
			v, ok := a[key]
			require.True(t, ok, "agent %s has no %q: %s", a["name"], key, rep.Data)
			require.NotEqual(t, "null", string(v), "agent %s: %q is null: %s", a["name"], key, rep.Data)
		}
	}
}

// TestControlRequestsRefuseUnknownFields: a misspelt field of a control
// request is refused, naming the known ones, as a run request's is — a
// cancel's "reson" is never silently dropped.
func TestControlRequestsRefuseUnknownFields(t *testing.T) {
	t.Parallel()
	nc := serveAPI(t)
	for _, tc := range []struct{ subject, body, text string }{
		{"lovia.api.run.r1.cancel", `{"reson":"stop"}`, "reson: unknown field; known fields: reason"},
		{"lovia.api.run.r1.approve", `{"call_id":"c1","decison":"approve"}`, "decison: unknown field; known fields: call_id, decision, reason"},
		{"lovia.api.run.r1.inject", `{"text":"hi"}`, "text: unknown field; known fields: content, key"},
		{"lovia.api.session.s1.rewind", `{"keep":1}`, "keep: unknown field; known fields: keep_entries"},
	} {
		e := errorReply(t, nc, tc.subject, tc.body)
		require.Equal(t, bus.TypeInvalidRequest, e.Type, tc.subject)
		require.Contains(t, e.Message, tc.text, tc.subject)
		require.NotEmpty(t, e.Hint)
	}
	// Known fields still pass the decoding (the run is unknown here).
	e := errorReply(t, nc, "lovia.api.run.r1.cancel", `{"reason":"stop"}`)
	require.Equal(t, bus.TypeNotFound, e.Type)
}
