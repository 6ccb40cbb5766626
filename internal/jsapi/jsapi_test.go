package jsapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/jsapi"
	"github.com/lovia-fleet/lovia/pkg/broker"
)

// connect starts an in-process server and connects to it.
func connect(t *testing.T) *nats.Conn {
	t.Helper()
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir(), Port: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	nc, err := srv.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

func TestLeaderGet(t *testing.T) {
	nc := connect(t)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx := context.Background()
	// A stream that allows direct gets: LeaderGet must still answer.
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, AllowDirect: true})
	require.NoError(t, err)
	ack, err := js.Publish(ctx, "s.a.1", []byte("one"))
	require.NoError(t, err)
	_, err = js.Publish(ctx, "s.b.1", []byte("two"))
	require.NoError(t, err)

	m, err := jsapi.LeaderGet(ctx, js, "S", jsapi.BySeq(ack.Sequence))
	require.NoError(t, err)
	require.Equal(t, "one", string(m.Data))
	require.Equal(t, "s.a.1", m.Subject)

	m, err = jsapi.LeaderGet(ctx, js, "S", jsapi.LastBySubject("s.*.1"))
	require.NoError(t, err)
	require.Equal(t, "two", string(m.Data), "the last of every matching subject")

	m, err = jsapi.LeaderGet(ctx, js, "S", jsapi.LastBySubject("s.c.*"))
	require.NoError(t, err)
	require.Nil(t, m, "no message: nil, nil")
	m, err = jsapi.LeaderGet(ctx, js, "S", jsapi.BySeq(99))
	require.NoError(t, err)
	require.Nil(t, m)

	m, err = jsapi.LeaderGet(ctx, js, "S", jsapi.NextBySubject("s.b.*", 1))
	require.NoError(t, err)
	require.Equal(t, "two", string(m.Data), "the first on the subject from seq 1")
	m, err = jsapi.LeaderGet(ctx, js, "S", jsapi.NextBySubject("s.a.*", ack.Sequence+1))
	require.NoError(t, err)
	require.Nil(t, m, "none on the subject past seq")
	m, err = jsapi.LeaderGet(ctx, js, "S", jsapi.NextBySubjectSince("s.>", time.Now().Add(-time.Minute)))
	require.NoError(t, err)
	require.Equal(t, ack.Sequence, m.Seq, "the first stored since a minute ago")

	_, err = jsapi.LeaderGet(ctx, js, "NOPE", jsapi.BySeq(1))
	require.Error(t, err)
	require.True(t, jsapi.StreamNotFound(err), "%v", err)
}

func TestAPIPrefix(t *testing.T) {
	nc := connect(t)
	for _, tc := range []struct {
		name string
		new  func() (jetstream.JetStream, error)
		want string
	}{
		{"default", func() (jetstream.JetStream, error) { return jetstream.New(nc) }, "$JS.API."},
		{"domain", func() (jetstream.JetStream, error) { return jetstream.NewWithDomain(nc, "hub") }, "$JS.hub.API."},
		{"prefix without a dot", func() (jetstream.JetStream, error) { return jetstream.NewWithAPIPrefix(nc, "x.API") }, "x.API."},
	} {
		js, err := tc.new()
		require.NoError(t, err)
		require.Equal(t, tc.want, jsapi.APIPrefix(js), tc.name)
	}
}
