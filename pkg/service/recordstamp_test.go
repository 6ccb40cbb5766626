package service

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/lifecycle"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// stampBundle is an API (not serving; tests call submit) with no worker:
// the requests it publishes stay in the runs stream.
type stampBundle struct {
	api   *API
	js    jetstream.JetStream
	st    *store.Store
	names bus.Names
}

func stampSetup(t *testing.T, chunk int) *stampBundle {
	t.Helper()
	nc, js, st := provisioned(t, store.Config{ChunkSize: chunk})
	cat, err := catalog.Parse([]byte("agents:\n  - name: calc\n    model: scripted\n    script:\n      - text: done\n"),
		catalog.Options{Registry: &loop.Registry{}})
	require.NoError(t, err)
	api, err := NewAPI(Config{Conn: nc, Store: st, Catalog: cat})
	require.NoError(t, err)
	names, err := bus.NewNames("")
	require.NoError(t, err)
	return &stampBundle{api: api, js: js, st: st, names: names}
}

// submitBody submits a client's encoded request body as the API's submit
// endpoint does (decoded as it arrives), and returns the run's record and
// the request the API published, as a worker receives them.
func (b *stampBundle) submitBody(t *testing.T, enc bus.Encoding, body []byte) (*store.RunEntry, *bus.RunRequest, nats.Header) {
	t.Helper()
	ctx := context.Background()
	req, _, err := bus.DecodeRunRequest(nats.Header{bus.HeaderContentType: []string{enc.ContentType()}}, body)
	require.NoError(t, err)
	rep, err := b.api.submit(ctx, req, enc)
	require.NoError(t, err)
	subj, err := b.names.Submit(rep.Agent)
	require.NoError(t, err)
	s, err := b.js.Stream(ctx, b.names.RunsStream())
	require.NoError(t, err)
	m, err := s.GetLastMsgForSubject(ctx, subj)
	require.NoError(t, err)
	got, _, err := bus.DecodeRunRequest(m.Header, m.Data)
	require.NoError(t, err)
	require.Equal(t, rep.RunID, got.RunID, "the last request published is another run's")
	e, err := b.st.Runs().Get(ctx, rep.RunID)
	require.NoError(t, err)
	return e, got, m.Header
}

func (b *stampBundle) submit(t *testing.T, enc bus.Encoding, req *bus.RunRequest) (*store.RunEntry, *bus.RunRequest, nats.Header) {
	t.Helper()
	body, err := bus.Marshal(enc, req)
	require.NoError(t, err)
	return b.submitBody(t, enc, body)
}

// requireSameRecord compares two run records field by field (every field
// of store.RunRecord, so a field added later is compared too), times by
// instant.
func requireSameRecord(t *testing.T, want, got store.RunRecord) {
	t.Helper()
	norm := func(r store.RunRecord) store.RunRecord {
		r.CreatedAt, r.UpdatedAt, r.StartedAt, r.FinishedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC(), r.StartedAt.UTC(), r.FinishedAt.UTC()
		r.Attempts = append([]store.Attempt(nil), r.Attempts...)
		for i := range r.Attempts {
			r.Attempts[i].At = r.Attempts[i].At.UTC()
		}
		return r
	}
	w, g := reflect.ValueOf(norm(want)), reflect.ValueOf(norm(got))
	for i := range w.NumField() {
		name := w.Type().Field(i).Name
		require.Equal(t, w.Field(i).Interface(), g.Field(i).Interface(), "field %s of the run record", name)
	}
}

// TestFirstRequestCarriesItsRecord (issue 16): the request of a run's first
// submission carries the stamp of the record the API created
// (bus.HeaderRecord), and the record a worker rebuilds from the request it
// receives and that stamp (lifecycle.Submitted) is the stored one, field
// by field — session, metadata and parent run included, in either
// encoding. Requests whose record could not be rebuilt so carry none.
func TestFirstRequestCarriesItsRecord(t *testing.T) {
	t.Parallel()
	meta := map[string]any{
		bus.MetaParentRunID: "run-parent-1", "n": 3, "neg": -7, "big": 300, "huge": uint64(1) << 40, "f": 1.5,
		"tags": []any{"a", 2, true, nil}, "nested": map[string]any{"k": "v", "m": map[string]any{"x": 1}},
	}
	for _, enc := range []bus.Encoding{bus.JSON, bus.Msgpack} {
		t.Run("rebuilt equals stored/"+string(enc), func(t *testing.T) {
			t.Parallel()
			b := stampSetup(t, 0)
			e, req, h := b.submit(t, enc, &bus.RunRequest{Agent: "calc", SessionID: "sess-1", Metadata: meta, Input: bus.TextInput("hi")})
			stamp, ok := bus.RecordStampOf(h)
			require.True(t, ok, "a first submission's request has no %s header: %v", bus.HeaderRecord, h)
			require.Equal(t, e.Revision, stamp.Revision, "the stamp's revision is not the record's")
			require.Equal(t, "run-parent-1", e.Record.ParentRunID)
			require.Equal(t, "sess-1", e.Record.SessionID)
			rebuilt := lifecycle.Submitted(lifecycle.SubmissionOf(req), stamp.Created)
			requireSameRecord(t, e.Record, rebuilt)
		})
	}

	t.Run("metadata that changes type on the way carries no stamp", func(t *testing.T) {
		t.Parallel()
		b := stampSetup(t, 0)
		// A msgpack client sending a small integer as a uint64 (no compact
		// ints): the API keeps uint64(5); the request it publishes encodes
		// it compactly, and a worker decodes int64(5).
		var raw strings.Builder
		enc := msgpack.NewEncoder(&raw)
		enc.SetCustomStructTag("json")
		require.NoError(t, enc.Encode(map[string]any{"agent": "calc", "input": "hi", "metadata": map[string]any{"n": uint64(5)}}))
		e, req, h := b.submitBody(t, bus.Msgpack, []byte(raw.String()))
		_, ok := bus.RecordStampOf(h)
		require.False(t, ok, "a request whose metadata decodes differently carries %s", bus.HeaderRecord)
		require.Equal(t, uint64(5), e.Record.Metadata["n"])
		require.NotEqual(t, e.Record.Metadata, lifecycle.SubmissionOf(req).Metadata, "the rebuild would have matched: the test shows nothing")
	})

	t.Run("a record stored in chunks carries no stamp", func(t *testing.T) {
		t.Parallel()
		b := stampSetup(t, 1024)
		e, _, h := b.submit(t, bus.JSON, &bus.RunRequest{Agent: "calc", Metadata: map[string]any{"pad": strings.Repeat("x", 4096)}, Input: bus.TextInput("hi")})
		require.True(t, e.Chunked(), "the record is not chunked: the test shows nothing")
		_, ok := bus.RecordStampOf(h)
		require.False(t, ok, "a chunked record's request carries %s", bus.HeaderRecord)
	})

	t.Run("a resubmission carries no stamp", func(t *testing.T) {
		t.Parallel()
		b := stampSetup(t, 0)
		ctx := context.Background()
		e, _, h := b.submit(t, bus.JSON, &bus.RunRequest{Agent: "calc", Input: bus.TextInput("hi")})
		_, ok := bus.RecordStampOf(h)
		require.True(t, ok)
		_, err := b.st.Runs().Modify(ctx, e.Record.RunID, func(r *store.RunRecord) error {
			r.Status, r.Attempt = store.RunFailed, 1
			return nil
		})
		require.NoError(t, err)
		e, _, h = b.submit(t, bus.JSON, &bus.RunRequest{RunID: e.Record.RunID, Agent: "calc", Input: bus.TextInput("again")})
		require.Equal(t, 2, e.Record.Submissions)
		_, ok = bus.RecordStampOf(h)
		require.False(t, ok, "a resubmission's request carries %s", bus.HeaderRecord)
	})
}
